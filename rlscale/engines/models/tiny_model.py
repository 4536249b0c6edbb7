"""The embedded default policy: a small Llama (transformers' classes) with the char tokenizer, made once
by a short deterministic supervised warm-up and cached by content hash, so every variant of a sweep
starts from the same weights.

The warm-up targets are the task's worked demonstrations, with the final answer perturbed in a
fraction of them (``warmup_correct_fraction`` kept exact): the base model then answers correctly only
some of the time (R0 low but not zero), and RL has a verifiable signal to sharpen.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
from dataclasses import asdict
from pathlib import Path
from typing import List, Tuple

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from rlscale.config.schema import ModelConfig, TaskConfig
from rlscale.core.types import THINK_CLOSE
from rlscale.engines.models.char_tokenizer import CharTokenizer
from rlscale.results.atomic import atomic_write
from rlscale.tasks.base import Demonstration, Task

WARMUP_VERSION = 2
NOISE_OFFSETS = (-10, -2, -1, 1, 2, 10)


def build_tiny_llama(cfg: ModelConfig, vocab_size: int) -> LlamaForCausalLM:
    config = LlamaConfig(vocab_size=vocab_size, hidden_size=cfg.hidden_size, num_hidden_layers=cfg.num_layers,
                         num_attention_heads=cfg.num_heads, num_key_value_heads=cfg.num_heads,
                         intermediate_size=cfg.intermediate_size,
                         max_position_embeddings=cfg.max_position_embeddings, tie_word_embeddings=False,
                         bos_token_id=1, eos_token_id=2, pad_token_id=0)
    return LlamaForCausalLM(config)


def perturbed(demo: Demonstration, offset: int) -> Demonstration:
    """The same (correct) trace with a final answer shifted by ``offset``: the base model has learned to
    compute but answers carelessly, which RL can fix from the verifier's signal alone."""
    return Demonstration(think=demo.think, answer=str(int(demo.answer) + offset))


def warmup_sequences(task: Task, tok: CharTokenizer, cfg: ModelConfig, gen: torch.Generator
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


def supervised_warmup(model: LlamaForCausalLM, seqs: List[Tuple[List[int], int]], cfg: ModelConfig,
                      gen: torch.Generator) -> List[float]:
    """Deterministic next-token training on the completions; returns the loss curve."""
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
    model.eval()
    return losses


def tiny_model_key(model_cfg: ModelConfig, task_cfg: TaskConfig, tok: CharTokenizer) -> str:
    payload = json.dumps({"v": WARMUP_VERSION, "model": asdict(model_cfg), "task": asdict(task_cfg),
                          "vocab": tok.vocab, "torch": torch.__version__.split("+")[0]}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def load_or_build_tiny(model_cfg: ModelConfig, task_cfg: TaskConfig, task: Task, tok: CharTokenizer,
                       cache_dir: Path) -> LlamaForCausalLM:
    """The warmed-up tiny model, from the cache when present; built under a file lock otherwise, so
    parallel variants of a sweep build it once."""
    key = tiny_model_key(model_cfg, task_cfg, tok)
    cache_dir = Path(cache_dir).expanduser()
    cache_dir.mkdir(parents=True, exist_ok=True)
    path = cache_dir / f"tiny-{key}.pt"
    with open(cache_dir / f"tiny-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        model = build_tiny_llama(model_cfg, tok.vocab_size)
        if path.exists():
            model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
            model.eval()
            return model
        threads = torch.get_num_threads()
        gen = torch.Generator().manual_seed(task_cfg.seed)
        torch.manual_seed(task_cfg.seed)
        model = build_tiny_llama(model_cfg, tok.vocab_size)
        losses = supervised_warmup(model, warmup_sequences(task, tok, model_cfg, gen), model_cfg, gen)
        atomic_write(path, lambda tmp: torch.save(model.state_dict(), tmp))
        (cache_dir / f"tiny-{key}.json").write_text(json.dumps(
            {"first_loss": losses[0], "last_loss": losses[-1], "threads": threads}))
        return model
