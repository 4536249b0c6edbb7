"""The embedded default policy: a small Llama (transformers' classes) with the char tokenizer, made once
by a short deterministic supervised warm-up and cached by content hash, so every variant of a sweep
starts from the same weights.

The warm-up targets are the task's worked demonstrations, with the final answer perturbed in a
fraction of them (``warmup_correct_fraction`` kept exact): the base model then answers correctly only
some of the time (R0 low but not zero), and RL has a verifiable signal to sharpen.
"""
from __future__ import annotations

import re

import fcntl
import hashlib
import inspect
import json
import logging
import time
from contextlib import contextmanager
from dataclasses import asdict, replace
from importlib.metadata import version
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Sequence, Tuple

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from rlscale.config.registry import TASK
from rlscale.config.schema import MixturePart
from rlscale.engines.models.configs import PolicyInputs, TinyModelConfig
from rlscale.core import types as core_types
from rlscale.core.types import THINK_CLOSE
from rlscale.engines.models.char_tokenizer import CharTokenizer
from rlscale.runfolder.atomic import atomic_write
from rlscale.tasks.answer_format import FormattedTask
from rlscale.tasks.base import Demonstration, Task, TaskConfig
from rlscale.tasks.mixture import MixtureTask

NOISE_OFFSETS = (-10, -2, -1, 1, 2, 10)
log = logging.getLogger(__name__)


def tiny_llama_config(cfg: TinyModelConfig, vocab_size: int) -> LlamaConfig:
    return LlamaConfig(vocab_size=vocab_size, hidden_size=cfg.hidden_size, num_hidden_layers=cfg.num_layers,
                       num_attention_heads=cfg.num_heads, num_key_value_heads=cfg.num_heads,
                       intermediate_size=cfg.intermediate_size,
                       max_position_embeddings=cfg.max_position_embeddings, tie_word_embeddings=False,
                       bos_token_id=1, eos_token_id=2, pad_token_id=0)


def build_tiny_llama(cfg: TinyModelConfig, vocab_size: int) -> LlamaForCausalLM:
    return LlamaForCausalLM(tiny_llama_config(cfg, vocab_size))


def perturbed(demo: Demonstration, offset: int) -> Demonstration:
    """The same (correct) trace with a final answer shifted by ``offset``: the base model has learned to
    compute but answers carelessly, which RL can fix from the verifier's signal alone. An answer that is not an
    integer (a code answer) has its last integer literal shifted instead; one without any is left as it is."""
    literals = list(re.finditer(r"-?\d+", demo.answer))
    if not literals:
        return demo
    last = literals[-1]
    answer = demo.answer[:last.start()] + str(int(last.group()) + offset) + demo.answer[last.end():]
    return Demonstration(think=demo.think, answer=answer)


def warmup_sequences(task: Task, tok: CharTokenizer, cfg: TinyModelConfig, gen: torch.Generator
                     ) -> List[Tuple[List[int], int]]:
    """(token ids, prompt length) of one supervised example per training problem, noise drawn from gen."""
    out = []
    for problem in task.train_problems():
        demo = task.demonstration(problem)
        if demo is None:
            continue
        if torch.rand((), generator=gen).item() >= cfg.warmup_correct_fraction:
            offset = NOISE_OFFSETS[int(torch.randint(len(NOISE_OFFSETS), (), generator=gen))]
            demo = perturbed(demo, offset)
        prompt = tok.encode_prompt(problem.prompt)
        completion = tok.encode(demo.think + THINK_CLOSE + demo.answer) + [tok.eos_id]
        out.append((prompt + completion, len(prompt)))
    if not out:
        raise ValueError(f"task '{task.name}' gives no demonstrations for the warm-up of model=tiny; "
                         "use model=hf with a pretrained checkpoint")
    return out


def supervised_warmup(model: LlamaForCausalLM, seqs: List[Tuple[List[int], int]], cfg: TinyModelConfig,
                      gen: torch.Generator, on_step: Callable[[int, float], None] = lambda step, loss: None
                      ) -> List[float]:
    """Deterministic next-token training on the completions; returns the loss curve. ``on_step(step, loss)``
    is called after each step (1-based)."""
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.warmup_lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 20) * max(0.05, 1 - s / cfg.warmup_steps))
    losses = []
    model.train()
    for _ in range(cfg.warmup_steps):
        idx = torch.randint(len(seqs), (cfg.warmup_batch,), generator=gen).tolist()
        width = max(len(seqs[i][0]) for i in idx)
        ids = torch.zeros(len(idx), width, dtype=torch.long)
        labels = torch.full((len(idx), width), -100, dtype=torch.long)
        for row, i in enumerate(idx):
            seq, plen = seqs[i]
            ids[row, : len(seq)] = torch.tensor(seq)
            labels[row, plen: len(seq)] = torch.tensor(seq[plen:])
        loss = model(input_ids=ids, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        on_step(len(losses), losses[-1])
    model.zero_grad(set_to_none=True)  # the policy starts without a gradient, as when loaded from the cache
    model.eval()
    return losses


# The code that determines the warm-up's weights: the source file of each of these, and of the task class the
# task config builds (``warmup_code``: its problems, their order and their worked demonstrations), is part of the
# cache key, so a checkpoint cached before a change to any of them is never loaded after it.
WARMUP_CODE: Tuple[object, ...] = (
    build_tiny_llama,  # this module: the model's shape, the warm-up's sequences, noise, optimizer and loop
    CharTokenizer,  # the vocabulary and the encoding of prompts and completions
    core_types,  # the think markers
    Demonstration,  # rlscale.tasks.base: problems and demonstrations
    FormattedTask,  # the prompts in ``task.answer_format``
)
# The libraries whose versions determine the warm-up's weights: initialization and kernels of the model,
# generation of the problems.
WARMUP_LIBRARIES = ("torch", "transformers", "reasoning-gym")


def warmup_code(task_cfg: TaskConfig, parts: Sequence[MixturePart] = ()) -> Tuple[object, ...]:
    """``WARMUP_CODE`` and the task class ``task_cfg.name`` builds (a plug-in's included); for a mixture, the
    mixture's module and each part's task class."""
    if parts:
        return (*WARMUP_CODE, MixtureTask, *(TASK.load(part.task.name) for part in parts))
    return (*WARMUP_CODE, TASK.load(task_cfg.name))


def code_digests(objects: Sequence[object]) -> Dict[str, str]:
    """Module name -> SHA-256 of its source file, for the module of each object (a module or what it defines);
    named by module rather than path, so clones at different paths share the key."""
    return {inspect.getmodule(obj).__name__: file_digest(Path(inspect.getsourcefile(obj))) for obj in objects}


def file_digest(path: Path) -> str:
    """SHA-256 of the file's bytes, in hex."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def library_versions(names: Sequence[str]) -> Dict[str, str]:
    """Distribution name -> installed version, without a local build tag (``2.13.0+cpu`` -> ``2.13.0``)."""
    return {name: version(name).split("+")[0] for name in names}


def tiny_model_key(model_cfg: TinyModelConfig, task_cfg: TaskConfig, tok: CharTokenizer,
                   parts: Sequence[MixturePart] = ()) -> str:
    """The cache key of the warmed-up tiny model: its configs (a mixture's parts among them), the vocabulary,
    the code that builds the warm-up (``warmup_code``) and the libraries it runs on (``WARMUP_LIBRARIES``)."""
    fields = {"model": asdict(model_cfg), "task": asdict(task_cfg), "vocab": tok.vocab,
              "code": code_digests(warmup_code(task_cfg, parts)), "libraries": library_versions(WARMUP_LIBRARIES)}
    if parts:
        fields["mixture"] = [asdict(part) for part in parts]
    payload = json.dumps(fields, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


class WarmupProgress:
    """Log lines while the warm-up trains (a minute or more on one core, before the run's first eval): one as it
    starts, one every ``every_s`` seconds with the step, loss and time left at the rate so far, one as it ends."""

    def __init__(self, steps: int, path: Path, every_s: float = 30.0, clock: Callable[[], float] = time.monotonic):
        self.steps, self.path, self.every_s, self.clock = steps, path, every_s, clock
        self.start = self.last = clock()
        log.info("model=tiny: no cached warm-up for this model and task; training it: %d supervised steps on one "
                 "thread, then cached as %s for every later run of the same config", steps, path)

    def __call__(self, step: int, loss: float) -> None:
        now = self.clock()
        if now - self.last < self.every_s or step >= self.steps:
            return
        self.last = now
        left = (now - self.start) / step * (self.steps - step)
        log.info("model=tiny warm-up: step %d/%d, loss %.3f, about %.0f s left", step, self.steps, loss, left)

    def done(self, losses: List[float]) -> None:
        log.info("model=tiny warm-up: %d steps in %.0f s, loss %.3f -> %.3f", len(losses), self.clock() - self.start,
                 losses[0] if losses else float("nan"), losses[-1] if losses else float("nan"))


@contextmanager
def one_thread() -> Iterator[None]:
    """Torch at one intra-op thread inside the block: reductions then add in one order whatever the machine's
    core count or ``engine.threads``, so the warm-up gives the same weights on every machine of a CPU kind."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def take_lock(lock, path: Path) -> None:
    """Hold ``lock`` (an open file) exclusively; says so when another process holds it (building ``path``)."""
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        log.info("model=tiny: waiting for another process to finish the warm-up it is caching as %s", path)
        fcntl.flock(lock, fcntl.LOCK_EX)


def load_or_build_tiny(model_cfg: TinyModelConfig, task_cfg: TaskConfig, task: Task, tok: CharTokenizer,
                       cache_dir: Path, parts: Sequence[MixturePart] = ()) -> LlamaForCausalLM:
    """The warmed-up tiny model, from the cache when present; built under a file lock otherwise, so
    parallel variants of a sweep build it once."""
    key = tiny_model_key(model_cfg, task_cfg, tok, parts)
    cache_dir = Path(cache_dir).expanduser()
    cache_dir.mkdir(parents=True, exist_ok=True)
    path = cache_dir / f"tiny-{key}.pt"
    with open(cache_dir / f"tiny-{key}.lock", "w") as lock:
        take_lock(lock, path)
        model = build_tiny_llama(model_cfg, tok.vocab_size)
        if path.exists():
            model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
            model.eval()
            return model
        gen = torch.Generator().manual_seed(task_cfg.seed)
        torch.manual_seed(task_cfg.seed)
        model = build_tiny_llama(model_cfg, tok.vocab_size)
        progress = WarmupProgress(model_cfg.warmup_steps, path)
        with one_thread():
            losses = supervised_warmup(model, warmup_sequences(task, tok, model_cfg, gen), model_cfg, gen, progress)
        progress.done(losses)
        atomic_write(path, lambda tmp: torch.save(model.state_dict(), tmp))
        (cache_dir / f"tiny-{key}.json").write_text(json.dumps({"first_loss": losses[0], "last_loss": losses[-1]}))
        return model


def tiny_policy(cfg: TinyModelConfig, inputs: PolicyInputs) -> Tuple[LlamaForCausalLM, CharTokenizer]:
    """``model.name=tiny``: the warmed-up tiny Llama (warmed up with thinking on, so its tokenizer thinks) and the
    char tokenizer, on CPU; the trainer moves the model to its device."""
    tok = CharTokenizer(inputs.phrase)
    task = inputs.task
    if isinstance(task, MixtureTask):  # a mixture's weights shape its RL pool, not its starting policy
        parts = [replace(part, weight=1.0) for part in inputs.parts]
        return load_or_build_tiny(cfg, inputs.task_cfg, task.evenly_weighted(), tok, inputs.cache_dir, parts), tok
    return load_or_build_tiny(cfg, inputs.task_cfg, task, tok, inputs.cache_dir), tok
