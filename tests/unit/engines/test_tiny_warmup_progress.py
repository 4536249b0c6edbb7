"""The warm-up of the embedded model says what it does while it trains (a minute or more on one core, before the
run's first eval): a line as it starts, a line every 30 s with the step, the loss and the time left at the rate so
far, a line as it ends; a process waiting on another's build of the same warm-up says so."""
from __future__ import annotations

import fcntl
import logging
from pathlib import Path

import torch

from rlscale.engines.models import tiny_model
from rlscale.engines.models.configs import TinyModelConfig
from rlscale.engines.models.char_tokenizer import CharTokenizer
from rlscale.rl.length import LengthConfig
from rlscale.tasks.reasoning_gym import ReasoningGymConfig, ReasoningGymTask


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_lines_name_the_step_the_loss_and_the_time_left(caplog):
    clock = Clock()
    with caplog.at_level(logging.INFO, logger=tiny_model.__name__):
        progress = tiny_model.WarmupProgress(300, Path("/cache/tiny-k.pt"), every_s=30.0, clock=clock)
        for step in range(1, 301):
            clock.now = 100.0 + 0.25 * step  # a line at steps 120 and 240 (30 s apart), none at the last
            progress(step, 2.0 - step / 400)
        progress.done([2.0, 1.25])
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == ("model=tiny: no cached warm-up for this model and task; training it: 300 supervised steps on "
                        "one thread, then cached as /cache/tiny-k.pt for every later run of the same config")
    assert lines[1:-1] == ["model=tiny warm-up: step 120/300, loss 1.700, about 45 s left",
                           "model=tiny warm-up: step 240/300, loss 1.400, about 15 s left"]
    assert lines[-1] == "model=tiny warm-up: 2 steps in 75 s, loss 2.000 -> 1.250"


def test_supervised_warmup_reports_every_step_with_its_loss():
    cfg = TinyModelConfig(warmup_steps=3, warmup_batch=2)
    tok = CharTokenizer(LengthConfig().phrase)
    task = ReasoningGymTask(ReasoningGymConfig(train_size=8, val_size=4))
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    model = tiny_model.build_tiny_llama(cfg, tok.vocab_size)
    seen = []
    losses = tiny_model.supervised_warmup(model, tiny_model.warmup_sequences(task, tok, cfg, gen), cfg, gen,
                                          lambda step, loss: seen.append((step, loss)))
    assert seen == list(enumerate(losses, start=1)) and len(losses) == 3


def test_a_process_waiting_for_anothers_build_says_so(tmp_path, caplog, monkeypatch):
    path = tmp_path / "tiny-k.pt"
    real = fcntl.flock
    with open(tmp_path / "tiny-k.lock", "w") as held, open(tmp_path / "tiny-k.lock", "w") as mine:
        real(held, fcntl.LOCK_EX)  # another open file of the lock: flock refuses this one until it is released
        waits = []

        def flock(fd, op):
            if not op & fcntl.LOCK_NB:  # the other process ends its build as we start to wait
                waits.append(op)
                real(held, fcntl.LOCK_UN)
            return real(fd, op)

        monkeypatch.setattr(fcntl, "flock", flock)
        with caplog.at_level(logging.INFO, logger=tiny_model.__name__):
            tiny_model.take_lock(mine, path)
    assert waits == [fcntl.LOCK_EX]
    assert [r.getMessage() for r in caplog.records] == [
        f"model=tiny: waiting for another process to finish the warm-up it is caching as {path}"]
