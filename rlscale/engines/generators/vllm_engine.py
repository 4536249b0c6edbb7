"""Starting an in-process vLLM engine on the policy held in memory.

The policy (a transformers causal LM) is exported once to a private work folder (config.json +
safetensors; vLLM reads token ids directly, so no tokenizer is exported and the project's tokenizer
decodes). Later policy versions are pushed in place (``reload_weights``) without restarting the engine,
as PipelineRL's in-flight updates need (Section 3.1). The engine runs in this process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``), which is what lets weights travel as tensors and the generator
step the engine one decode step at a time. vLLM's temporary and cache files (its kernels compiled at the
first generation included) stay in the process's work folder under the system temporary directory.

LM-head precision (Section 3.2): vLLM computes the head in ``head_dtype`` by casting the hidden states
and the head weight, exactly as ``rlscale.engines.models.policy.head_output`` does, so the FP32 head (ScaleRL)
and the bf16 head (baseline) are both honoured whatever the model's dtype.
"""
from __future__ import annotations

import atexit
import contextlib
import functools
import os
import random
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping

import numpy as np
import torch

DTYPE_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}

# Process-wide settings the in-process CPU engine needs; a value already in the environment wins.
ENGINE_ENV_DEFAULTS = {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",  # in-process: tensors as weights, one decode step at a time
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB of KV cache on CPU
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",  # the learner shares this process: don't pin its threads
}
WORK_PREFIX = "rlscale-vllm-"
WORK_SUBDIRS = {"TMPDIR": "tmp", "VLLM_RPC_BASE_PATH": "rpc", "VLLM_CACHE_ROOT": "cache",
                "TORCHINDUCTOR_CACHE_DIR": "inductor", "HF_HOME": "hf"}


@dataclass(frozen=True)
class EngineSettings:
    """How the engine is started. ``dtype``: the model's compute dtype; ``head_dtype``: the LM head's
    (float32 for ScaleRL's FP32 head); ``seed``: the engine's default seed (requests carry their own)."""

    dtype: str
    head_dtype: str
    seed: int


def engine_settings(model, lm_head_fp32: bool, seed: int) -> EngineSettings:
    """The settings that reproduce the torch generator's numerics for ``model``."""
    dtype = next(model.parameters()).dtype
    if dtype not in DTYPE_NAMES:
        raise ValueError(f"vLLM generator: unsupported model dtype {dtype}")
    return EngineSettings(dtype=DTYPE_NAMES[dtype], head_dtype="float32" if lm_head_fp32 else "bfloat16", seed=seed)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_orphans(parent: Path) -> None:
    """Remove the work folders of processes that are gone (a killed process cannot clean up)."""
    for folder in parent.glob(f"{WORK_PREFIX}*"):
        pid = folder.name[len(WORK_PREFIX):].split("-")[0]
        if pid.isdigit() and not _pid_alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


@functools.lru_cache(maxsize=None)
def workspace() -> Path:
    """This process's vLLM work folder, made on first use and removed at exit: the environment
    variables of ``WORK_SUBDIRS`` point into it from then on (vLLM and torch read them at any time),
    and ``ENGINE_ENV_DEFAULTS`` are set where the environment has no value."""
    parent = Path(tempfile.gettempdir())
    _remove_orphans(parent)
    root = Path(tempfile.mkdtemp(prefix=f"{WORK_PREFIX}{os.getpid()}-", dir=parent))
    atexit.register(shutil.rmtree, root, True)
    for name, sub in WORK_SUBDIRS.items():
        (root / sub).mkdir()
        os.environ[name] = str(root / sub)
    for name, value in ENGINE_ENV_DEFAULTS.items():
        os.environ.setdefault(name, value)
    return root


def export_checkpoint(model) -> Path:
    """Write ``model`` (config.json + safetensors) to a new folder of the workspace for vLLM to load."""
    folder = Path(tempfile.mkdtemp(prefix="checkpoint-", dir=workspace()))
    model.save_pretrained(folder, safe_serialization=True)
    return folder


@contextlib.contextmanager
def preserved_global_rng() -> Iterator[None]:
    """In-process vLLM seeds the global RNGs (random, numpy, torch) at start-up; keep the run's streams."""
    py_state, np_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        yield
    random.setstate(py_state)
    np.random.set_state(np_state)


def start_engine(checkpoint: Path, settings: EngineSettings):
    """An in-process ``vllm.LLM`` on ``checkpoint``: eager mode (no compilation, fastest start on CPU),
    token ids in and out (no tokenizer), log-probs after temperature scaling (the sampling
    distribution, as the learner's rho needs them)."""
    from vllm import LLM

    with preserved_global_rng():
        return LLM(model=str(checkpoint), skip_tokenizer_init=True, dtype=settings.dtype,
                   hf_overrides={"head_dtype": settings.head_dtype}, enforce_eager=True,
                   logprobs_mode="processed_logprobs", seed=settings.seed)


def reload_weights(llm, state_dict: Mapping[str, torch.Tensor]) -> None:
    """Replace the engine's weights in place with ``state_dict`` (Hugging Face parameter names)."""
    weights = ((name, tensor.detach()) for name, tensor in state_dict.items())
    llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
