"""``rlscale sweep --dry-run`` prints each distinct job's estimated memory per GPU (``rlscale.engines.memory``),
for a model known only by its config.json (docs/sizing/qwen3-8b), with activation checkpointing as set (for
``auto``, the card size below which it turns on) and the generator's rows (``engine.generator_rows``), and says
when a model has no shape."""
from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from rlscale.cli import app

QWEN3_8B = Path(__file__).resolve().parents[3] / "docs" / "sizing" / "qwen3-8b"
PLAN = ["model=hf", f"model.path={QWEN3_8B}", "model.dtype=bfloat16", "engine.learner=deepspeed", "engine.zero_stage=3",
        "launcher=slurm", "launcher.nodes=2", "launcher.tasks_per_node=4", "launcher.gpus_per_node=8",
        "offpolicy.num_generators=4", "offpolicy.update_every_tokens=0", "batch.prompts=8", "batch.generations=16",
        "batch.micro_batch=1",
        "generation.max_think_tokens=12288", "generation.max_answer_tokens=2048", "length.window=[12288,12288]"]


def dry_run(tmp_path: Path, *args: str):
    return CliRunner().invoke(app, ["sweep", "conf=loo", "--results", str(tmp_path / "results"), "--dry-run", *args],
                              env={"COLUMNS": "400"})


def test_an_8b_job_known_by_its_config_json_is_sized_per_gpu(tmp_path):
    result = dry_run(tmp_path, "--prompt-tokens", "512", *PLAN)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "memory per GPU, estimated (prompts of 512 tokens" in text
    # 512 + 12,288 + 16 + 2,048 + 1 tokens; 8 ZeRO-3 ranks, rank 0 keeping the model whole for its generator, whose
    # fused copies it holds too, and one published copy (immediate updates); 4 generators of 2 prompts x 16
    # generations each; the head's logits for 4,096 positions at a time
    assert ("8.19B │ 8 (deepspeed ZeRO-3) │ 14865 │ auto: on for cards under 126 GiB, then 68.2 GiB per trainer GPU │ "
            "114 GiB (weights 1.91, whole_weights 15.3, optimizer 17.2, activations 51, lm_head 4.64, "
            "decoder_copies") in text
    assert "89 GiB (weights 15.3, decoder_copies 8.44, kv_cache 65.3) │ auto: all 32 from 98.9 GiB cards" in text
    assert "bf16_head │ 8.19B │ 8 (deepspeed ZeRO-3) │ 14865 │ auto: on for cards under 124 GiB" in text  # half the logits
    assert "ppo_offpolicy │ 8.19B │ 8 (deepspeed ZeRO-3) │ 14865 │ auto: on for cards under 400 GiB" in text  # 128 rows


def test_scheduled_updates_keep_k_plus_one_published_copies_on_rank_0(tmp_path):
    """With ``offpolicy.update_every_tokens`` > 0 (PipelineRL-2 here) the published policy keeps 3 versions."""
    plan = [p for p in PLAN if not p.startswith("offpolicy.update_every_tokens")]
    result = dry_run(tmp_path, "--prompt-tokens", "512", *plan, "engine.activation_checkpointing=true")
    assert result.exit_code == 0, result.output
    assert ("98.7 GiB (weights 1.91, whole_weights 15.3, optimizer 17.2, activations 5.5, lm_head 4.64, "
            "decoder_copies 8.44, published_weights 45.8)") in " ".join(result.output.split())


def test_refilled_generator_rows_bound_the_kv_cache(tmp_path):
    """``engine.generator_rows=8``: each generator's cache holds 8 of its chunk's 32 rows, a quarter."""
    result = dry_run(tmp_path, "--prompt-tokens", "512", *PLAN, "engine.generator_rows=8")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "(weights 15.3, decoder_copies 8.44, kv_cache 16.3) │ 8 of 32, refilled │" in text


def test_checkpointing_set_on_keeps_each_layers_input(tmp_path):
    result = dry_run(tmp_path, "--prompt-tokens", "512", *PLAN, "engine.activation_checkpointing=true")
    assert result.exit_code == 0, result.output
    assert ("8.19B │ 8 (deepspeed ZeRO-3) │ 14865 │ on │ 68.2 GiB (weights 1.91, whole_weights 15.3, optimizer 17.2, "
            "activations 5.5, lm_head 4.64, decoder_copies 8.44, published_weights 15.3) │") in \
        " ".join(result.output.split())


def test_a_model_without_a_shape_says_so_and_the_dry_run_goes_on(tmp_path):
    (tmp_path / "empty").mkdir()
    result = dry_run(tmp_path, "model=hf", f"model.path={tmp_path / 'empty'}")
    assert result.exit_code == 0, result.output
    assert "no estimate: model.path=" in " ".join(result.output.split())
