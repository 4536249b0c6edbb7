"""GPU benchmark of rlscale's RL step, run on a lent H100 / H200 in one call.

For two model shapes with random weights (SmolLM2-135M: Llama, 30 layers, GQA 9/3; a Qwen2-0.5B shape:
24 layers, GQA 14/2, 152k vocabulary) and one batch (32 prompts x 8 generations, 128 prompt tokens, 512
completion tokens: a 480-token think budget, the 8-token interruption phrase, a 24-token answer,
Section 3.2), it prints:

- generation tokens/s of the torch generator (static KV cache + CUDA graphs) and its decode time as a
  fraction of the HBM bound (bytes per step = weights read + live KV cache of the batch);
- training tokens/s of the torch learner (bf16 weights, fp32 master) and its MFU (6 x params x tokens
  over the card's dense bf16 peak);
- the end-to-end RL step (generate, score, advantages, one update: ``RunLoop.update``'s work);
- the same RL step in TRL's GRPOTrainer (transformers ``generate``, same model, batch and lengths, a
  trivial reward) and the ratio rlscale / TRL;
- PipelineRL-8 against the synchronous loop (samples/s), on one GPU or, with two, one generator GPU
  and one trainer GPU (Section 3.1);
- the LM head alone (``head``): time and log-probability error against a float64 head of the bf16 head, a
  float32 GEMM and the FP32 head on bf16 GEMMs (``rlscale.engines.models.policy.fp32_head_matmul``).

Each variant runs with the bf16 LM head (Section 2's baseline, TRL's precision, used for the ratio) and
the FP32 head (ScaleRL, Section 3.2). Results go to ``--out`` (gpu_bench.json, gpu_bench.md) section by
section, so a call stopped at its limit still returns what finished.

    python bench/gpu_bench.py --out DIR [--sections env,checks,head,models,trl,pipeline] [--models smollm2-135m,qwen2-0.5b]
    python bench/gpu_bench.py --device cpu --tiny --out DIR     # the same code paths on CPU, tiny shapes
    python bench/gpu_bench.py --quick --out DIR                  # CI (tests/unit/engines/test_benches.py): seconds

``--quick`` is ``--device cpu --tiny`` without TRL, the head alone on QUICK_HEAD_ROWS rows, PipelineRL over
QUICK_PIPELINE_STEPS steps, and the ``long`` section (``lib.paper_lengths``, not in the default sections: the
ScaleRL step at the paper's lengths on one GPU, ``--long-models``, ``--long-steps``) on the tiny shape. The learner on the paper's 14,865-token sequences, with activation checkpointing and
the head in chunks, is ``bench/long_sequence_bench.py``.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Sequence

import torch

from lib import paper_lengths
from lib.decode import decode_loop
from lib.step import components, rl_step
from lib.runs import run_config
from lib.shapes import PEAKS, SHAPES, Shape, build_model, peaks
from lib.timers import release, sync, timed
from lib.workloads import CPU_WORK, GPU_WORK, PAPER_ROWS, BenchTask, BenchTokenizer, Workload, trivial_reward
from rlscale.config.schema import RunConfig
from rlscale.engines.learners.build import build_learner
from rlscale.engines.models.policy import count_parameters
from rlscale.train.components import Components, learner_settings_of
from rlscale.train.loop import prepare_batch

ROOT = Path(__file__).resolve().parents[1]


def measure_variant(shape_name: str, fp32_head: bool, work: Workload, device: str, out: dict,
                    ablation: bool) -> None:
    shape = SHAPES[shape_name]
    dev = torch.device(device)
    cfg = run_config(work, shape, fp32_head, "ppo", device)
    head = "fp32_head" if fp32_head else "bf16_head"
    rows = work.prompts * work.generations
    with tempfile.TemporaryDirectory() as tmp:
        c = components(cfg, build_model(shape, torch.bfloat16 if dev.type == "cuda" else torch.float32, dev.type),
                       work, Path(tmp))
        params = count_parameters(c.model)
        flops_peak, bw_peak, card = peaks(dev)
        rec: Dict[str, float] = {"params": params}
        prompts = [p for p in c.sampler.encode(list(range(work.prompts))) for _ in range(work.generations)]
        groups = c.sampler.sample(work.prompts, 0)  # warm-up (graph capture, compilation); a batch to train on
        runs = []
        for seed in (1, 2):
            done, seconds = timed(lambda: c.generator.generate(prompts, torch.Generator().manual_seed(seed)), dev)
            runs.append((seconds, sum(len(x.tokens) for x in done)))
        gen_s, gen_tokens = min(runs)
        steps = max(len(x.tokens) for x in done)
        rec.update(gen_seconds=gen_s, gen_tokens=gen_tokens, decode_steps=steps, gen_tok_s=gen_tokens / gen_s)
        engine = getattr(c.generator, "engine", None)
        if engine is not None:
            rec.update(decode_loop(engine, prompts, work, steps, dev, bw_peak, out["env"].get("copy_bw", float("nan"))))
            if ablation:
                rec["ablation_gen_tok_s"] = ablate(c, prompts, fp32_head, work, dev)
                paper = decode_loop(engine, prompts * (PAPER_ROWS // rows), work, steps, dev, bw_peak, float("nan"))
                rec["paper_batch_hbm_fraction"] = paper["hbm_fraction"]
                engine.buckets.clear()
        batch, adv, weights, _ = prepare_batch(groups, c)
        c.learner.step(batch, adv, weights)  # warm-up
        train_runs = [timed(lambda: c.learner.step(batch, adv, weights), dev) for _ in range(2)]
        tokens = train_runs[0][0].trained_tokens
        train_s = min(t for _, t in train_runs)
        rec.update(train_seconds=train_s, train_tokens=tokens, train_tok_s=tokens / train_s,
                   mfu=6.0 * params * tokens / train_s / flops_peak)
        if ablation and dev.type == "cuda":  # the same update without torch.compile
            eager = build_learner(learner_settings_of(cfg), c.model)
            try:
                eager.step(batch, adv, weights)
                rec["train_tok_s_eager"] = tokens / min(timed(lambda: eager.step(batch, adv, weights), dev)[1]
                                                        for _ in range(2))
            except torch.OutOfMemoryError:  # eager keeps float32 [micro-batch tokens, vocab] tensors
                rec["train_tok_s_eager"] = "out of memory"
            del eager
            release(dev)
        if dev.type == "cuda":  # the peak of the RL steps below, not of the ablations above
            torch.cuda.reset_peak_memory_stats(dev)
        rl_step(c, 0)  # warm-up of the whole step
        rec.update(rl_step_seconds=min(timed(lambda: rl_step(c, s), dev)[1] for s in (1, 2)))
        if dev.type == "cuda":
            rec["max_memory_gib"] = torch.cuda.max_memory_allocated(dev) / 2**30
        c.source.close()
        out.setdefault("models", {}).setdefault(shape_name, {})[head] = rec
        out["card"] = card


def ablate(c: Components, prompts: List[List[int]], fp32_head: bool, work: Workload, dev: torch.device) -> dict:
    """Generation tokens/s of the GPU path without torch.compile, and without CUDA graphs either."""
    from rlscale.engines.generators.graph_decode import GraphDecoder

    budgets = torch.full((len(prompts),), work.think)
    out = {}
    for name, graphs in (("graphs_no_compile", True), ("eager_steps", False)):
        engine = GraphDecoder(c.model, c.generator.rules, fp32_head, 1.0, work.think, graphs=graphs, compiled=False)
        warm = len(prompts) if graphs else 8  # graphs: capture for this bucket; eager: kernels loaded
        engine.generate(prompts[:warm], budgets[:warm], 0, 0, None, c.tok.decode)
        done, seconds = timed(lambda: engine.generate(prompts, budgets, 1, 0, None, c.tok.decode)[0], dev)
        out[name] = sum(len(x.tokens) for x in done) / seconds
    return out


# -- TRL ----------------------------------------------------------------------------------------------
def trl_worker(shape_name: str, work: Workload, device: str, result_path: Path) -> None:
    """GRPOTrainer on the same shape, batch and lengths: fp32 weights with bf16 autocast (TRL's usual
    mixed precision; its head runs in bf16), transformers ``generate``, the trivial reward."""
    from datasets import Dataset
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from transformers import PreTrainedTokenizerFast, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    shape = SHAPES[shape_name]
    tok = BenchTokenizer(shape.vocab)
    vocab = {str(i): i for i in range(shape.vocab)}
    backend = Tokenizer(WordLevel(vocab, unk_token="0"))
    backend.pre_tokenizer = WhitespaceSplit()
    hf_tok = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token=str(tok.pad_id), eos_token=str(tok.eos_id),
                                     unk_token="0")
    model = build_model(shape, torch.float32, device)
    model.generation_config.eos_token_id = tok.eos_id
    model.generation_config.pad_token_id = tok.pad_id
    task = BenchTask(tok, work)
    steps = 2
    dataset = Dataset.from_dict({"prompt": [p.prompt for p in task.train_problems()[:work.prompts * steps]]})
    rows = work.prompts * work.generations
    gen_seconds: List[float] = [0.0] * steps  # per optimizer step, all generate calls of the step
    completion_tokens: List[int] = [0] * steps
    step_seconds: List[float] = []
    real_generate = model.generate

    def generate(*args, **kwargs):  # times TRL's own call of generate
        sync(torch.device(device))
        start = time.perf_counter()
        ids = real_generate(*args, **kwargs)
        sync(torch.device(device))
        gen_seconds[len(step_seconds)] += time.perf_counter() - start
        completion_tokens[len(step_seconds)] += int((ids[:, work.prompt_len:] != tok.pad_id).sum())
        return ids

    model.generate = generate

    class StepTimer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            sync(torch.device(device))
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            sync(torch.device(device))
            step_seconds.append(time.perf_counter() - self.start)

    with tempfile.TemporaryDirectory() as tmp:
        args = GRPOConfig(output_dir=tmp, per_device_train_batch_size=shape.micro_batch,
                          gradient_accumulation_steps=rows // shape.micro_batch, num_generations=work.generations,
                          max_completion_length=work.completion, temperature=1.0, top_p=1.0, beta=0.0,
                          learning_rate=1e-6, bf16=device == "cuda", use_cpu=device == "cpu", max_steps=steps,
                          logging_steps=1, report_to=[], save_strategy="no", disable_tqdm=True, seed=0,
                          shuffle_dataset=False, dataloader_num_workers=0)
        trainer = GRPOTrainer(model=model, reward_funcs=lambda completions, **kw: [trivial_reward(c) for c in completions],
                              args=args, train_dataset=dataset, processing_class=hf_tok, callbacks=[StepTimer()])
        trainer.train()
    result_path.write_text(json.dumps({"step_seconds": step_seconds, "gen_seconds": gen_seconds,
                                       "completion_tokens": completion_tokens, "trl": __import__("trl").__version__}))


def measure_trl(shape_name: str, work_flag: List[str], device: str, out: dict, timeout: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trl.json"
        cmd = [sys.executable, __file__, "--trl-worker", shape_name, "--trl-result", str(path), "--device", device,
               *work_flag]
        try:
            # one visible GPU: TRL's Trainer would wrap the model in nn.DataParallel, which GRPOTrainer refuses
            env = {**os.environ, "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]}
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
            error = None if done.returncode == 0 else (done.stderr or done.stdout)[-3000:]
        except subprocess.TimeoutExpired:
            error = f"TRL run exceeded {timeout:.0f} s"
        if error is not None:
            out.setdefault("trl", {})[shape_name] = {"error": error}
            return
        raw = json.loads(path.read_text())
    step = raw["step_seconds"][-1]  # the first step warms up
    gen = raw["gen_seconds"][-1]
    out.setdefault("trl", {})[shape_name] = {"rl_step_seconds": step, "gen_seconds": gen,
                                             "gen_tok_s": raw["completion_tokens"][-1] / gen,
                                             "version": raw["trl"], "all_steps": raw["step_seconds"]}


# -- PipelineRL vs synchronous ----------------------------------------------------------------------------
def measure_pipeline(shape_name: str, work: Workload, device: str, steps: int, out: dict,
                     update_every: Sequence[int] = (0,)) -> None:
    """Samples/s over ``steps`` RL steps after one warm-up step: synchronous (PPO-off-policy-1, generation
    and update alternate) and PipelineRL-8 (one generator process: the GPU after the trainer's, or the same)
    with immediate in-flight updates (0, recorded as ``pipeline``) or updates scheduled every N decode steps
    (N in ``update_every``, recorded as ``pipeline-every-N``)."""
    shape = SHAPES[shape_name]
    dev = torch.device(device)
    rec = {"gpus": torch.cuda.device_count() if dev.type == "cuda" else 0, "steps": steps}
    for mode, every in [("ppo", 0)] + [("pipeline", n) for n in update_every]:
        cfg = run_config(work, shape, True, mode, device)
        cfg.offpolicy.update_every_tokens = every
        with tempfile.TemporaryDirectory() as tmp:
            c = components(cfg, build_model(shape, torch.bfloat16 if dev.type == "cuda" else torch.float32, dev.type),
                           work, Path(tmp))
            try:
                rl_step(c, 0)
                start = time.perf_counter()
                lags = []
                for s in range(1, steps + 1):
                    groups, _ = rl_step(c, s)
                    versions = [v for g in groups for x in g.completions for v in x.versions]
                    lags.append(s - sum(versions) / max(1, len(versions)))
                sync(dev)
                wall = time.perf_counter() - start
            finally:
                c.source.close()
            rec[f"{mode}-every-{every}" if every else mode] = {
                "samples_per_s": steps * work.prompts * work.generations / wall, "seconds": wall,
                "mean_lag": sum(lags) / len(lags), "update_every_tokens": every}
        release(dev)
    if "pipeline" in rec:
        rec["ratio"] = rec["pipeline"]["samples_per_s"] / rec["ppo"]["samples_per_s"]
    out.setdefault("pipeline", {})[f"{shape_name}-{rec['gpus']}gpu"] = rec


# -- environment and correctness checks -------------------------------------------------------------------
def measure_env(device: str, out: dict) -> None:
    import transformers

    env = {"torch": torch.__version__, "transformers": transformers.__version__}
    if device == "cuda":
        dev = torch.device("cuda")
        env["card"] = torch.cuda.get_device_name(dev)
        env["gpus"] = torch.cuda.device_count()
        src = torch.randn(1 << 28, device=dev)  # 1 GiB
        dst = torch.empty_like(src)
        dst.copy_(src)
        _, t = timed(lambda: [dst.copy_(src) for _ in range(10)], dev)
        env["copy_bw"] = 2 * src.numel() * 4 * 10 / t
        a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
        b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
        a @ b
        _, t = timed(lambda: [a @ b for _ in range(10)], dev)
        env["bf16_matmul_flops"] = 2 * 8192**3 * 10 / t
        del src, dst, a, b
        torch.cuda.empty_cache()
    out["env"] = env


def run_checks(device: str, out: dict) -> None:
    """Before timing: the Triton sampler equals the torch sampler; the decoder matches HF's forward in
    bf16; graph replay gives the completions eager steps give."""
    from rlscale.engines.kernels import gumbel
    from rlscale.engines.generators.graph_decode import GraphDecoder
    from rlscale.engines.generators.phases import PhaseRules
    from rlscale.engines.generators.static_decoder import StaticKVDecoder

    dev = torch.device(device)
    checks: Dict[str, object] = {}
    logits = torch.randn(64, 49152, device=dev) * 4
    seed = torch.tensor([987654321], device=dev)
    try:
        draw, lse = gumbel.gumbel_sample(logits, 0.8, seed)
        ref_draw, ref_lse = gumbel.gumbel_sample_torch(logits, 0.8, seed)
        checks["sampler_same_draws"] = float((draw == ref_draw).float().mean())
        checks["sampler_lse_max_err"] = float((lse - ref_lse).abs().max())
    except Exception as err:  # the torch sampler then serves the rest of the run, and the table says so
        checks["sampler_error"] = f"{type(err).__name__}: {err}"[:500]
        gumbel.triton = None
    shape = SHAPES["smollm2-135m" if device == "cuda" else "tiny"]
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    model = build_model(shape, dtype, device)
    tok = BenchTokenizer(shape.vocab)
    dec = StaticKVDecoder(model, fp32_head=True)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, tok.ordinary, (4, 32), generator=gen).to(dev)
    attn = torch.ones_like(ids)
    attn[0, :10] = 0
    cache = dec.new_cache(4, 64)
    with torch.no_grad():
        hidden, pos = dec.prefill(cache, ids, attn)
        errors = []
        for step in range(8):
            positions = (attn.cumsum(-1) - 1).clamp(min=0)
            ref = model(input_ids=ids, attention_mask=attn, position_ids=positions).logits[:, -1].float()
            mine = dec.logits(hidden)
            errors.append(float((mine - ref).norm() / ref.norm()))
            token = torch.randint(0, tok.ordinary, (4,), generator=gen).to(dev)
            ids, attn = torch.cat([ids, token[:, None]], 1), torch.cat([attn, torch.ones_like(token[:, None])], 1)
            hidden = dec.decode(cache, token, pos, torch.tensor([32 + step], device=dev), 64)
            pos = pos + 1
    checks["decoder_vs_hf_rel_err_max"] = max(errors)
    rules = PhaseRules(eos_id=tok.eos_id, pad_id=tok.pad_id, think_close_ids=tok.think_close_ids,
                       interrupt_ids=tok.interrupt_ids, max_answer=8, interruption=True)
    prompts = [ids[i, 10 if i == 0 else 0:32].tolist() for i in range(4)] * 3
    budgets = torch.tensor([40, 70, 20, 100] * 3)
    results = []
    for graphs in (True, False):
        engine = GraphDecoder(model, rules, True, 1.0, max_budget=100, graphs=graphs)
        results.append(engine.generate(prompts, budgets, 1234, 0, None, tok.decode)[0])
    checks["graph_equals_eager"] = all(a.tokens == b.tokens for a, b in zip(*results))
    checks["graph_vs_eager_logp_max_diff"] = max(max((abs(x - y) for x, y in zip(a.gen_logp, b.gen_logp)), default=0)
                                                 for a, b in zip(*results))
    phrase = tok.interrupt_ids
    checks["phases_ok"] = all((c.tokens[-1] == tok.eos_id or c.truncated) and len(c.tokens) <= b + len(phrase) + 8
                              and (not c.interrupted or c.tokens[c.think_tokens:c.think_tokens + len(phrase)] == phrase)
                              for c, b in zip(results[0], budgets.tolist()))
    out["checks"] = checks


# -- the LM head alone --------------------------------------------------------------------------------------
HEAD_ROWS, HEAD_ERROR_ROWS = 16384, 1024
QUICK_HEAD_ROWS, QUICK_PIPELINE_STEPS = 1024, 2


def measure_head(shape_name: str, device: str, out: dict, rows: int = HEAD_ROWS) -> None:
    """The head of Section 3.2 on bf16 weights and ``rows`` rows: ms per forward and max |log-softmax - the
    float64 head's| over HEAD_ERROR_ROWS rows (or all), for the bf16 head, a float32 GEMM of float32 copies (the
    FP32 head before ``fp32_head_matmul``) and ``fp32_head_matmul`` on a bf16 and on a float32 hidden state."""
    import torch.nn.functional as F

    from rlscale.engines.models.policy import MM_OUT_DTYPE_ON_CUDA, fp32_head_matmul

    shape, dev = SHAPES[shape_name], torch.device(device)
    g = torch.Generator(device=dev).manual_seed(0)
    weight = (torch.randn(shape.vocab, shape.hidden, device=dev, generator=g) * 0.05).to(torch.bfloat16)
    hidden32 = torch.randn(rows, shape.hidden, device=dev, generator=g) * 2
    hidden16 = hidden32.to(torch.bfloat16)
    variants = {
        "bf16 head": (lambda h: F.linear(h.to(torch.bfloat16), weight), hidden16),
        "fp32 GEMM of fp32 copies": (lambda h: F.linear(h.float(), weight.float()), hidden32),
        "fp32_head_matmul, bf16 hidden": (lambda h: fp32_head_matmul(weight, h), hidden16),
        "fp32_head_matmul, fp32 hidden": (lambda h: fp32_head_matmul(weight, h), hidden32),
    }
    rec: Dict[str, object] = {"mm_out_dtype": bool(MM_OUT_DTYPE_ON_CUDA), "rows": rows}
    with torch.no_grad():
        for name, (head, h) in variants.items():
            exact = torch.log_softmax(h[:HEAD_ERROR_ROWS].double() @ weight.double().t(), -1)
            err = (torch.log_softmax(head(h[:HEAD_ERROR_ROWS]).double(), -1) - exact).abs().max().item()
            del exact
            head(h)

            def ten(head=head, h=h) -> None:  # outputs dropped as they come: [rows, vocab] float32 each
                for _ in range(10):
                    head(h)

            _, seconds = timed(ten, dev)
            rec[name] = {"ms": seconds / 10 * 1e3, "logp_max_err": err}
            release(dev)
    out.setdefault("head", {})[shape_name] = rec


# -- report ------------------------------------------------------------------------------------------------
def fmt(value, spec: str = ".3g") -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "n/a"
    return value if isinstance(value, str) else format(value, spec)


def table(out: dict) -> str:
    lines = [f"card: {out.get('card', out.get('env', {}).get('card', 'cpu'))}; torch {out['env']['torch']}, "
             f"transformers {out['env']['transformers']}"]
    env = out["env"]
    if "copy_bw" in env:
        lines.append(f"measured: copy {env['copy_bw'] / 1e12:.2f} TB/s (read+write), bf16 matmul "
                     f"{env['bf16_matmul_flops'] / 1e12:.0f} TFLOP/s; bounds use datasheet peaks {PEAKS}")
    if "checks" in out:
        lines.append("checks: " + ", ".join(f"{k}={fmt(v) if isinstance(v, float) else v}" for k, v in out["checks"].items()))
    models = out.get("models", {})
    if models:
        lines += ["", "| metric | " + " | ".join(f"{m} {h}" for m in models for h in models[m]) + " |",
                  "|---|" + "---|" * sum(len(v) for v in models.values())]
        rows = [("generation tokens/s (generate call)", "gen_tok_s", ".4g"),
                ("decode tokens/s (decode loop)", "decode_tok_s", ".4g"), ("decode s", "decode_seconds", ".3g"),
                ("decode / HBM bound (datasheet)", "hbm_fraction", ".1%"),
                ("decode / HBM bound (measured copy BW)", "hbm_fraction_measured_bw", ".1%"),
                ("decode / HBM bound at the paper's batch (768 rows, datasheet)", "paper_batch_hbm_fraction", ".1%"),
                ("training tokens/s", "train_tok_s", ".4g"), ("training MFU (6PT / bf16 peak)", "mfu", ".1%"),
                ("training tokens/s, eager learner (no torch.compile)", "train_tok_s_eager", ".4g"),
                ("RL step s (end to end)", "rl_step_seconds", ".3g"), ("peak GPU memory GiB", "max_memory_gib", ".3g")]
        for label, key, spec in rows:
            cells = [fmt(models[m][h].get(key), spec) for m in models for h in models[m]]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        for name in ("graphs_no_compile", "eager_steps"):
            cells = [fmt(models[m][h].get("ablation_gen_tok_s", {}).get(name), ".4g") for m in models for h in models[m]]
            lines.append(f"| generation tokens/s, {name.replace('_', ' ')} | " + " | ".join(cells) + " |")
    heads = out.get("head", {})
    if heads:
        rows = next(iter(heads.values()))["rows"]
        lines += ["", f"| LM head alone, bf16 weights, {rows} rows | " + " | ".join(heads) + " |",
                  "|---|" + "---|" * len(heads)]
        names = [k for k, v in next(iter(heads.values())).items() if isinstance(v, dict)]
        for name in names:
            cells = [f"{fmt(heads[m][name]['ms'], '.3g')} ms, err {fmt(heads[m][name]['logp_max_err'], '.2g')}"
                     for m in heads]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    for m, rec in models.items():
        if rec.get("bf16_head", {}).get("rl_step_seconds") and rec.get("fp32_head", {}).get("rl_step_seconds"):
            lines.append(f"FP32-head RL step / bf16-head RL step, {m}: "
                         f"{rec['fp32_head']['rl_step_seconds'] / rec['bf16_head']['rl_step_seconds']:.2f}x")
    trl = out.get("trl", {})
    if trl:
        lines += ["", "| TRL GRPOTrainer (bf16 autocast) | generation tokens/s | RL step s | rlscale bf16-head RL step s "
                  "| speedup (TRL s / rlscale s) |", "|---|---|---|---|---|"]
        for m, rec in trl.items():
            if "error" in rec:
                lines.append(f"| {m} | failed: {rec['error'][-300:]!r} | | | |")
                continue
            ours = models.get(m, {}).get("bf16_head", {}).get("rl_step_seconds")
            ratio = rec["rl_step_seconds"] / ours if ours else None
            lines.append(f"| {m} (trl {rec['version']}) | {fmt(rec['gen_tok_s'], '.4g')} | "
                         f"{fmt(rec['rl_step_seconds'])} | {fmt(ours)} | {fmt(ratio, '.1f')}x |")
    pipe = out.get("pipeline", {})
    if pipe:
        lines += ["", "| PipelineRL-8 vs synchronous | in-flight updates | sync samples/s | pipeline samples/s | "
                  "ratio | mean lag |", "|---|---|---|---|---|---|"]
        for name, rec in pipe.items():
            for mode, run in rec.items():
                if not mode.startswith("pipeline"):
                    continue
                every = run.get("update_every_tokens", 0)
                when = f"every {every} tokens" if every else "immediate"
                lines.append(f"| {name} | {when} | {fmt(rec['ppo']['samples_per_s'], '.4g')} | "
                             f"{fmt(run['samples_per_s'], '.4g')} | "
                             f"{fmt(run['samples_per_s'] / rec['ppo']['samples_per_s'], '.2f')}x | "
                             f"{fmt(run['mean_lag'], '.2f')} |")
    lines += paper_lengths.table(out.get("long", {}))
    return "\n".join(lines)


def save(out: dict, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "gpu_bench.json").write_text(json.dumps(out, indent=1, default=str))
    (out_dir / "gpu_bench.md").write_text(table(out) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="tiny shape and batch (CPU smoke run)")
    ap.add_argument("--quick", action="store_true", help="CPU smoke run of seconds for CI (module docstring)")
    ap.add_argument("--sections", default="env,checks,head,models,trl,pipeline",
                    help="trl runs inside models, after each model's rlscale measurements")
    ap.add_argument("--models", default="smollm2-135m,qwen2-0.5b")
    ap.add_argument("--pipeline-model", default="smollm2-135m")
    ap.add_argument("--long-models", default="qwen3-1.7b,qwen3-4b", help="shapes of the long section")
    ap.add_argument("--long-steps", type=int, default=2, help="RL steps per shape in the long section")
    ap.add_argument("--pipeline-steps", type=int, default=16)
    ap.add_argument("--update-every", default="0",
                    help="comma-separated offpolicy.update_every_tokens of the PipelineRL runs (0 = immediate)")
    ap.add_argument("--trl-timeout", type=float, default=240)
    ap.add_argument("--budget", type=float, default=570, help="seconds; TRL runs are cut to end within it")
    ap.add_argument("--trl-worker")
    ap.add_argument("--trl-result", type=Path)
    args = ap.parse_args()
    if args.quick:
        args.device, args.tiny, args.pipeline_steps = "cpu", True, QUICK_PIPELINE_STEPS
        args.sections = ",".join([s for s in args.sections.split(",") if s != "trl"] + ["long"])
    head_rows = QUICK_HEAD_ROWS if args.quick else HEAD_ROWS
    work = CPU_WORK if args.tiny else GPU_WORK
    work_flag = ["--tiny"] if args.tiny else []
    if args.trl_worker:
        trl_worker(args.trl_worker, work, args.device, args.trl_result)
        return
    models = ["tiny"] if args.tiny else args.models.split(",")
    sections = args.sections.split(",")
    out: dict = {"workload": work.__dict__}
    measure_env(args.device, out)
    save(out, args.out)
    deadline = time.perf_counter() + args.budget
    for section in sections:
        start = time.perf_counter()
        if section == "checks":
            run_checks(args.device, out)
            release(torch.device(args.device))
        elif section == "models":  # per model: the rlscale variants, then TRL on the same shape
            for m in models:
                for fp32_head in (False, True):
                    measure_variant(m, fp32_head, work, args.device, out, ablation=not fp32_head)
                    release(torch.device(args.device))
                    save(out, args.out)
                if "trl" in sections:
                    left = deadline - time.perf_counter() - 15
                    measure_trl(m, work_flag, args.device, out, min(args.trl_timeout, max(left, 1)))
                    save(out, args.out)
        elif section == "trl" and "models" not in sections:
            for m in models:
                measure_trl(m, work_flag, args.device, out, args.trl_timeout)
                save(out, args.out)
        elif section == "head":
            for m in models:
                measure_head(m, args.device, out, head_rows)
                save(out, args.out)
        elif section == "long":
            for m in ["tiny"] if args.tiny else args.long_models.split(","):
                paper_lengths.measure(m, args.device, args.long_steps, out)
                save(out, args.out)
        elif section == "pipeline":
            measure_pipeline("tiny" if args.tiny else args.pipeline_model, work, args.device, args.pipeline_steps, out,
                             [int(n) for n in args.update_every.split(",")])
        out.setdefault("section_seconds", {})[section] = time.perf_counter() - start
        save(out, args.out)
        print(f"[{section} done in {time.perf_counter() - start:.0f} s]", flush=True)
    print(table(out))


if __name__ == "__main__":
    main()
