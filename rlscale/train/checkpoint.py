"""Checkpoints: one file, written to a temporary name then renamed (atomic), holding everything a
resume needs to reproduce the uninterrupted run: weights, optimizer, RNG states, the data position,
the curriculum's pass-rate history, pending off-policy batches, compute so far, and the size of
metrics.jsonl at that step (lines written after it are cut on resume, then written again identically).

The file is ``torch.save``'s payload followed by a seal: a JSON record of the payload's sha256, the
run it belongs to (``RunIdentity``: the hash of its config less the fields a resume may change, its seed,
its folder's name), the step, and the history it was taken in (``LogPrefix``: the size and sha256 of
metrics.jsonl and samples.jsonl at that step), then the record's length and ``SEAL_MAGIC``. Every load checks
the seal first: a file without one (truncated, or written by an older rlscale), with a payload whose checksum
differs (damaged), of another run, or of another history of the same run (a checkpoint copied from another
results tree: the folder's logs are shorter than it says, or begin otherwise) is refused with one line naming
the file, before anything is written. A resume thus cuts the logs only at the line end the checkpoint
recorded, and says how many lines it removed.
A kill while writing leaves a temporary ``.last.pt.*.tmp``; the next run of the folder removes it
(``remove_stale_temporaries``).

A resume never deletes metrics it cannot reproduce: without a readable checkpoint, metrics.jsonl may
only hold the step-0 eval (a run killed before its first checkpoint), which the restart writes again;
anything more refuses the resume with one line naming the checkpoint (``check_resumable``).
"""
from __future__ import annotations

import errno
import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO, Dict, List, Optional, Tuple

import torch

from rlscale.config.schema import RunConfig, without_default_sections
from rlscale.runfolder.atomic import atomic_write
from rlscale.runfolder.errors import Refused

CHECKPOINT = "checkpoints/last.pt"
SEAL_MAGIC = b"RLSEAL01"
SEAL_TAIL = 8 + len(SEAL_MAGIC)  # the seal record's length (8 bytes, big-endian), then the magic
# Fields left out of a run's config hash: where the run folder and caches are (a copied or moved results
# folder resumes), the seed (compared on its own, to say so), the planned steps (a run can be extended), and
# where and how it is launched and tracked (they change no weight).
RESUMABLE = ("out", "cache_dir", "seed", "trainer.max_steps", "launcher", "logger")
_CHUNK = 1 << 20
LOGS = ("metrics.jsonl", "samples.jsonl")  # the run's append-only logs, cut back to a checkpoint on resume
_KEPT = "metrics.jsonl kept; restore the file or start over with --force"


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be written; the message is one line naming the file and the cause."""


class ResumeRefused(Refused):
    """A checkpoint that cannot be resumed (unreadable, damaged, of another run), or metrics beyond step 0
    without a checkpoint."""


@dataclass(frozen=True)
class RunIdentity:
    """The run a checkpoint belongs to."""

    config: str  # sha256 of the resolved config less ``RESUMABLE``
    seed: int
    run: str  # the run folder's name

    @classmethod
    def of(cls, cfg: RunConfig, run_dir: Path) -> "RunIdentity":
        """The hash is of the JSON of the config's fields as written to config.yaml (resolved), so it does not
        depend on whether the config came from overrides or from a run folder's config.yaml."""
        fields = without_default_sections(asdict(cfg))  # sections older configs lack count only when set
        for key in RESUMABLE:
            parent, _, leaf = key.rpartition(".")
            (fields[parent] if parent else fields).pop(leaf, None)
        text = json.dumps(fields, sort_keys=True, default=str)
        return cls(config=hashlib.sha256(text.encode()).hexdigest(), seed=cfg.seed, run=Path(run_dir).name)

    def differences(self, other: "RunIdentity") -> List[str]:
        """What differs in ``other`` (a checkpoint's) from this run, in words."""
        said = []
        if other.seed != self.seed:
            said.append(f"seed {other.seed}, not {self.seed}")
        if other.run != self.run:
            said.append(f"run folder {other.run!r}, not {self.run!r}")
        if other.config != self.config:
            said.append(f"config sha256 {other.config[:12]}, not {self.config[:12]}")
        return said


@dataclass(frozen=True)
class LogPrefix:
    """One of the run's logs (``LOGS``) as it was when a checkpoint was taken: its size and the sha256 of its
    bytes."""

    name: str
    size: int
    sha256: str

    @classmethod
    def of(cls, run_dir: Path, name: str) -> "LogPrefix":
        path = Path(run_dir) / name
        size = path.stat().st_size if path.exists() else 0
        return cls(name=name, size=size, sha256=_file_prefix_sha256(path, size))


@dataclass(frozen=True)
class Seal:
    """The record after a checkpoint's payload: its checksum, its run, its step and its history (none in
    seals of older rlscale)."""

    sha256: str
    identity: RunIdentity
    step: int
    history: Tuple[LogPrefix, ...] = ()

    def to_bytes(self) -> bytes:
        record = json.dumps(asdict(self), sort_keys=True).encode()
        return record + len(record).to_bytes(8, "big") + SEAL_MAGIC

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "Seal":
        return cls(sha256=str(data["sha256"]), identity=RunIdentity(**data["identity"]), step=int(data["step"]),
                   history=tuple(LogPrefix(**entry) for entry in data.get("history", ())))


def save_checkpoint(run_dir: Path, state: Dict[str, Any], identity: RunIdentity) -> None:
    path = Path(run_dir) / CHECKPOINT
    history = tuple(LogPrefix.of(run_dir, name) for name in LOGS)
    try:
        atomic_write(path, lambda tmp: _save(state, identity, history, tmp))
    except (OSError, RuntimeError) as err:
        raise CheckpointError(f"{path}: cannot write the checkpoint: {_cause(err)}") from None


def _save(state: Dict[str, Any], identity: RunIdentity, history: Tuple[LogPrefix, ...], tmp: Path) -> None:
    with open(tmp, "w+b") as fh:  # a Python file: a failed write leaves its OSError (errno) in the chain
        torch.save(state, fh)
        size = fh.tell()
        fh.seek(0)
        seal = Seal(sha256=_sha256(fh, size), identity=identity, step=int(state["step"]), history=history)
        fh.seek(size)
        fh.write(seal.to_bytes())


def _sha256(fh: BinaryIO, size: int) -> str:
    """The sha256 of the next ``size`` bytes of ``fh``."""
    digest = hashlib.sha256()
    while size > 0:
        chunk = fh.read(min(_CHUNK, size))
        if not chunk:
            break
        digest.update(chunk)
        size -= len(chunk)
    return digest.hexdigest() if size == 0 else ""


def _file_prefix_sha256(path: Path, size: int) -> str:
    """The sha256 of the first ``size`` bytes of ``path`` ("" when it holds fewer; of nothing when absent
    and ``size`` is 0)."""
    if not path.exists():
        return hashlib.sha256().hexdigest() if size == 0 else ""
    with open(path, "rb") as fh:
        return _sha256(fh, size)


def _cause(err: BaseException) -> str:
    """The OSError behind ``err`` (torch reports a short write as 'unexpected pos'), in words."""
    seen = err
    while seen is not None and not isinstance(seen, OSError):
        seen = seen.__cause__ or seen.__context__
    if isinstance(seen, OSError):
        return "no space left on device" if seen.errno == errno.ENOSPC else (seen.strerror or str(seen))
    return " ".join(str(err).split())[:300]


def read_seal(path: Path) -> Seal:
    """The seal of the checkpoint at ``path``, its payload's checksum verified; ``ResumeRefused`` naming the
    file when it has no readable seal or the checksum differs."""
    try:
        with open(path, "rb") as fh:
            seal, payload = _seal_at_end(fh, path)
            fh.seek(0)
            if _sha256(fh, payload) != seal.sha256:
                raise ResumeRefused(f"{path}: damaged checkpoint (its sha256 differs from the one written with "
                                    f"it); {_KEPT}")
    except OSError as err:
        raise ResumeRefused(f"{path}: unreadable checkpoint ({err.strerror or err}); {_KEPT}") from None
    return seal


def sealed_step(run_dir: Path) -> Optional[int]:
    """The step the seal of ``run_dir``'s checkpoint records (checksum not verified), or None when there is
    no checkpoint or no readable seal."""
    path = Path(run_dir) / CHECKPOINT
    try:
        with open(path, "rb") as fh:
            return _seal_at_end(fh, path)[0].step
    except (OSError, ResumeRefused):
        return None


def _seal_at_end(fh: BinaryIO, path: Path) -> Tuple[Seal, int]:
    """The seal at the end of the open checkpoint ``fh`` and the size of the payload before it."""
    end = fh.seek(0, 2)
    fh.seek(max(0, end - SEAL_TAIL))
    tail = fh.read(SEAL_TAIL)
    length = int.from_bytes(tail[:8], "big")
    if tail[8:] != SEAL_MAGIC or length > end - SEAL_TAIL:
        raise ResumeRefused(f"{path}: unreadable checkpoint (no seal at its end: truncated, or written by an older "
                            f"rlscale); {_KEPT}")
    payload = end - SEAL_TAIL - length
    fh.seek(payload)
    try:
        return Seal.from_json(json.loads(fh.read(length))), payload
    except (ValueError, KeyError, TypeError) as err:
        raise ResumeRefused(f"{path}: unreadable checkpoint (damaged seal: {type(err).__name__}); {_KEPT}") from None


def verify_checkpoint(run_dir: Path, identity: RunIdentity) -> Optional[Seal]:
    """The seal of ``run_dir``'s checkpoint (None when there is none), refused with ``ResumeRefused``
    unless the file is whole and belongs to the run ``identity``."""
    path = Path(run_dir) / CHECKPOINT
    if not path.exists():
        return None
    seal = read_seal(path)
    differences = identity.differences(seal.identity)
    if differences:
        raise ResumeRefused(f"{path} (step {seal.step}) belongs to another run ({'; '.join(differences)}); nothing "
                            "changed; move it away or start over with --force")
    for log in seal.history:
        file = Path(run_dir) / log.name
        size = file.stat().st_size if file.exists() else 0
        if size < log.size or _file_prefix_sha256(file, log.size) != log.sha256:
            held = (f"holds {size} bytes, fewer than the {log.size} it was taken with" if size < log.size
                    else f"begins with other bytes than the {log.size} it was taken with")
            raise ResumeRefused(f"{path} (step {seal.step}) belongs to another history of this run: "
                                f"{Path(run_dir) / log.name} {held} (a checkpoint copied from another results "
                                "folder?); nothing changed; move it away or start over with --force")
    return seal


def load_checkpoint(run_dir: Path, identity: RunIdentity) -> Optional[Dict[str, Any]]:
    """The checkpoint's state, verified by ``verify_checkpoint``; None when there is none."""
    if verify_checkpoint(run_dir, identity) is None:
        return None
    path = Path(run_dir) / CHECKPOINT
    try:
        return torch.load(path, map_location="cpu", weights_only=False)  # the zip reader skips the seal
    except Exception as err:  # torch.load raises many types for a damaged file
        raise ResumeRefused(f"{path}: unreadable checkpoint ({type(err).__name__}); {_KEPT}") from None


def check_resumable(run_dir: Path, identity: RunIdentity) -> None:
    """Raise ``ResumeRefused`` unless the run can start or resume without losing metrics: its checkpoint
    is whole and its own (``verify_checkpoint``), or there is none and metrics.jsonl holds nothing beyond
    step 0."""
    run_dir = Path(run_dir)
    if verify_checkpoint(run_dir, identity) is not None:
        return
    if not unsaved_start_only(run_dir / "metrics.jsonl"):
        raise ResumeRefused(f"{run_dir / CHECKPOINT}: missing, but {run_dir / 'metrics.jsonl'} holds steps after 0; "
                            "nothing deleted; restore the checkpoint or start over with --force")


def remove_stale_temporaries(run_dir: Path) -> List[Path]:
    """Remove the temporary checkpoint files a killed writer left in ``run_dir``; return them. Call only
    while holding the run folder's lock: no other writer of its checkpoints is alive."""
    path = Path(run_dir) / CHECKPOINT
    stale = sorted(path.parent.glob(f".{path.name}.*.tmp"))
    for tmp in stale:
        tmp.unlink(missing_ok=True)
    return stale


def unsaved_start_only(metrics: Path) -> bool:
    """Whether ``metrics`` is absent or holds only step-0 lines (written again by a restart)."""
    if not metrics.exists():
        return True
    with open(metrics, "rb") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                if line.endswith(b"\n"):
                    return False
                continue  # a torn last line: the writer was killed while writing it
            if not isinstance(record, dict) or record.get("step") != 0:
                return False
    return True
