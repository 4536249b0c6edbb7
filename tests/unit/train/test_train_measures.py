"""What the trainer writes on every metrics line: the compute axis named for what was measured, and the
standard error of the validation reward."""
from __future__ import annotations

import math

import pytest

from rlscale.core.types import Completion
from rlscale.tasks.base import Problem
from rlscale.train.compute import ComputeMeter
from rlscale.train.evaluate import evaluate, pass_rate_se


def test_measured_compute_is_gpu_hours_on_cuda_and_core_hours_elsewhere():
    meter = ComputeMeter(params=10, device_type="cpu")
    meter.totals.device_seconds = 7200.0
    meter.add_generation(prompt_tokens=3, generated_tokens=5, samples=2)
    cpu = meter.as_metrics()
    assert cpu == {"core_hours": 2.0, "flops": 2.0 * 10 * 8, "samples": 2, "tokens": 5}
    cuda = ComputeMeter(params=10, device_type="cuda", num_devices=2)
    cuda.load_state_dict(meter.state_dict())
    assert cuda.as_metrics() == {"gpu_hours": 2.0, "gpus": 2, "flops": 160.0, "samples": 2, "tokens": 5}


def test_a_multi_rank_job_counts_every_gpu_and_says_its_shape(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "16")  # 2 nodes x 8 ranks, as rlscale.train.ranks or torchrun export them
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    meter = ComputeMeter(params=10, device_type="cuda", num_devices=8)  # the GPUs rank 0 sees on its node
    assert meter.num_devices == 16
    meter.totals.device_seconds = 3600.0
    meter.add_generation(prompt_tokens=3, generated_tokens=5, samples=2)
    assert meter.as_metrics() == {"gpu_hours": 1.0, "gpus": 16, "flops": 160.0, "samples": 2, "tokens": 5,
                                  "nodes": 2, "tasks_per_node": 8}
    monkeypatch.delenv("WORLD_SIZE")
    monkeypatch.delenv("LOCAL_WORLD_SIZE")
    assert not {"nodes", "gpus"} & ComputeMeter(params=10, device_type="cpu").as_metrics().keys()


def test_pass_rate_se_hand_computed():
    # per-prompt pass rates 1, 0.5, 0, 0.5: mean 0.5, squared deviations 0.25 + 0 + 0.25 + 0 = 0.5,
    # sample variance 0.5 / 3, se = sqrt(0.5 / 3 / 4) = sqrt(1 / 24) = 0.2041241
    assert pass_rate_se([1.0, 0.5, 0.0, 0.5]) == pytest.approx(0.2041241452)
    assert pass_rate_se([0.25] * 5) == 0.0
    assert math.isnan(pass_rate_se([1.0]))


class ParityTask:
    """Correct when the answer equals the problem's answer."""

    name = "parity"

    def is_correct(self, problem: Problem, answer_text: str) -> bool:
        return answer_text == problem.answer


class Tokens:
    def encode_prompt(self, prompt: str) -> list:
        return [ord(c) for c in prompt]


class ScriptedGenerator:
    """Answers from a fixed script, one per requested completion, in request order."""

    def __init__(self, answers: list):
        self.answers = list(answers)

    def generate(self, prompts, rng, version):
        out = []
        for _ in prompts:
            text = "</think>" + self.answers.pop(0)
            out.append(Completion(prompt_ids=[], tokens=[], gen_logp=[], sampled=[], versions=[], text=text))
        return out


def test_eval_line_standard_error_over_prompts():
    # 3 prompts x 2 samples; correct: prompt 0 both, prompt 1 one, prompt 2 none -> pass rates 1, 0.5, 0.
    # val_reward = 3 / 6 = 0.5; se = sd(1, 0.5, 0) / sqrt(3) = 0.5 / sqrt(3) = 0.2886751
    problems = [Problem(index=i, prompt=f"p{i}", answer="y") for i in range(3)]
    result = evaluate(ParityTask(), Tokens(), ScriptedGenerator(["y", "y", "y", "n", "n", "n"]), problems,
                      samples=2, seed=0, step=0)
    assert result.val_reward == 0.5 and result.val_samples == 6
    assert result.val_reward_se == pytest.approx(0.5 / math.sqrt(3))


def test_truncation_is_logged_when_it_rises_back_above_the_limit_and_when_it_falls_back(caplog):
    from types import SimpleNamespace

    from rlscale.runfolder.truncation import TruncationWatch
    from rlscale.train.loop import RunLoop

    loop = SimpleNamespace(step=0, truncating=False, truncation=TruncationWatch(0.1))
    caplog.set_level("INFO", logger="rlscale.train")
    # high at the start and falling (no signal), held at 2 %, 30 % from step 51, 0 from step 81
    rates = [0.5] * 20 + [0.02] * 30 + [0.3] * 30 + [0.0] * 30
    for step, rate in enumerate(rates, start=1):
        loop.step = step
        RunLoop.watch_truncation(loop, rate)
    said = [(r.levelname, r.getMessage().split(":")[0]) for r in caplog.records if "truncation" in r.getMessage()]
    assert said == [("WARNING", "step 56"), ("INFO", "step 94")]  # the 20-step mean: 10.4 % at 56, 9 % at 94