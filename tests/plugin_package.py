"""A package of plug-ins (``loss.name`` and ``task.name`` values ``module:attribute``) written into a folder, with
objects that do not provide the interfaces, for the tests of plug-ins; and the package metadata by which an
installed package offers a plug-in under a name of its own (an entry point of ``rlscale.losses``)."""
from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Dict

PACKAGE = "plugs"
REPORTED_RATIO = 2.0  # the ratio the plug-in loss reports, a value no built-in loss logs as ratio_mean

LOSSES = f'''
from dataclasses import dataclass

import torch

from rlscale.knobs import knob
from rlscale.rl.losses import LossConfig
from rlscale.rl import LossTokens, PolicyTerm

NOT_CALLABLE = 3


@dataclass
class ClippedConfig(LossConfig):
    """The knob of ``clipped_reinforce``."""

    clip: float = knob(1.0, "advantages are clipped to [-clip, clip]", gt=0)


def clipped_reinforce(tokens: LossTokens, spec: ClippedConfig) -> PolicyTerm:
    """-clip(A, -clip, clip) log pi, reporting its clip as the ratio, so that metrics.jsonl shows the knob acted."""
    return PolicyTerm(loss=-tokens.advantages.clamp(-spec.clip, spec.clip) * tokens.logp,
                      ratio=torch.full_like(tokens.logp, spec.clip), clipped=tokens.advantages.abs() > spec.clip)


class NotAConfig:
    pass


def bad_config(tokens: LossTokens, spec: NotAConfig) -> PolicyTerm:
    raise AssertionError("never called")


def reinforce(tokens: LossTokens, spec: LossConfig) -> PolicyTerm:
    """-A log pi, reporting the ratio {REPORTED_RATIO} so that metrics.jsonl shows this loss trained."""
    return PolicyTerm(loss=-tokens.advantages * tokens.logp, ratio=torch.full_like(tokens.logp, {REPORTED_RATIO}),
                      clipped=torch.zeros_like(tokens.mask, dtype=torch.bool))


def one_argument(tokens: LossTokens) -> PolicyTerm:
    raise AssertionError("never called")
'''

TASKS = '''
from typing import List, Optional

from rlscale.tasks.base import Demonstration, Problem, TaskConfig


class Halving:
    """"half of 2n =" -> n, with a worked trace for the tiny model's warm-up."""

    name = "halving"

    def __init__(self, cfg: TaskConfig):
        numbers = [(cfg.seed + 7 * i) % 500 for i in range(cfg.train_size + cfg.val_size)]
        problems = [(f"half of {2 * n} =", str(n)) for n in numbers]
        self._train = [Problem(i, p, a) for i, (p, a) in enumerate(problems[:cfg.train_size])]
        self._val = [Problem(i, p, a) for i, (p, a) in enumerate(problems[cfg.train_size:])]

    def train_problems(self) -> List[Problem]:
        return self._train

    def val_problems(self) -> List[Problem]:
        return self._val

    def is_correct(self, problem: Problem, answer_text: str) -> bool:
        return answer_text.strip() == problem.answer

    def demonstration(self, problem: Problem) -> Optional[Demonstration]:
        n = int(problem.answer)
        return Demonstration(think=f"{n}+{n}={2 * n}", answer=problem.answer)


class NoVerifier:
    name = "no_verifier"

    def __init__(self, cfg: TaskConfig):
        pass

    def train_problems(self) -> List[Problem]:
        return []

    def val_problems(self) -> List[Problem]:
        return []


def make_task(cfg: TaskConfig) -> Halving:
    return Halving(cfg)
'''

BROKEN = '''
raise RuntimeError("this module fails as it is imported")
'''


def write_package(root: Path, modules: Dict[str, str], package: str = PACKAGE) -> Path:
    """``root/<package>/`` with an ``__init__.py`` and each module of ``modules`` (name -> source); returns
    ``root``, the folder to put on ``sys.path`` or ``PYTHONPATH``."""
    folder = root / package
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    for name, source in modules.items():
        (folder / f"{name}.py").write_text(source.lstrip())
    return root


def write_plugins(root: Path) -> Path:
    """The package ``plugs``: ``plugs.losses``, ``plugs.tasks`` and ``plugs.broken`` under ``root``."""
    return write_package(root, {"losses": LOSSES, "tasks": TASKS, "broken": BROKEN})


def write_entry_points(root: Path, group: str, points: Dict[str, str], distribution: str = "plugs") -> None:
    """The metadata of an installed distribution under ``root`` (a ``.dist-info`` folder) that offers ``points``
    (name -> ``module:attribute``) in the entry-point group ``group``, as ``pip install`` of a package declaring
    ``[project.entry-points."<group>"]`` writes it."""
    info = root / f"{distribution}-0.1.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in points.items()))


def documented_examples(doc: Path) -> Dict[str, str]:
    """Module name -> source of each example module of ``doc``: a line ```my_pkg/NAME.py`:``` followed by a
    Python code block."""
    return dict(re.findall(r"`my_pkg/(\w+)\.py`:\n\n```python\n(.*?)```", doc.read_text(), flags=re.S))


def forget(package: str) -> None:
    """Drop ``package`` and its modules from ``sys.modules``, so the next import reads the files again."""
    for name in [m for m in sys.modules if m == package or m.startswith(f"{package}.")]:
        del sys.modules[name]
