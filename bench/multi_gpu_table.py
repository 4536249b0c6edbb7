"""Helper of bench/multi_gpu_job.sh: the sweep specs of its runs, and its two verdicts read from the runs'
metrics.jsonl.

    spec FILE NAME RANKS OVERRIDE...        a one-run grid sweep of RANKS trainer ranks (launcher.tasks_per_node)
    equality REF RUN --out DIR [--rel R]    per-step loss and grad-norm relative differences, the final max |dw|;
                                            exit 1 beyond R (default 1e-4) or when the sampled batches differ
    throughput --out DIR [--warmup N] LABEL:GENERATOR_GPUS=RUN...
                                            samples/s and mean RL step after N warm-up updates, gpu_hours' GPUs,
                                            and the ratio of the last setting to the first

A run's samples/s is the samples of its train lines after the warm-up over their ``step_seconds`` (each line's
samples are ``samples_per_s`` x ``step_seconds``: the completions trained on at that update); the mean RL step
is the mean ``step_seconds``. ``gpu_hours`` x 3600 over the same updates' seconds less compilation gives the GPUs
it counted (trainer and generator GPUs of the job; on CPU ``core_hours`` gives the busy cores). Tables go to stdout and to DIR as markdown and json.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, List

import torch
import yaml

THROUGHPUT_TARGET = 1.6
SAMPLED = ("reward", "samples", "tokens")  # equal when both runs trained on the same completions


def write_spec(path: Path, name: str, ranks: int, overrides: List[str]) -> None:
    cell = f"tasks_per_node-{ranks}"
    path.write_text(yaml.safe_dump({"name": name, "kind": "grid", "base": {"name": cell},
                                    "axes": {"launcher.tasks_per_node": [ranks]}, "seeds": 1,
                                    "overrides": overrides}, sort_keys=False))


def run_dir(path: str) -> Path:
    """A run folder, or the one run folder of a sweep folder."""
    folder = Path(path)
    if (folder / "config.yaml").exists():
        return folder
    found = sorted(p.parent for p in folder.glob("*/config.yaml"))
    if len(found) != 1:
        sys.exit(f"{folder}: expected one run folder, found {len(found)}")
    return found[0]


def train_lines(folder: Path) -> List[Dict]:
    metrics = folder / "metrics.jsonl"
    status = folder / "status.json"
    state = json.loads(status.read_text()) if status.exists() else {"state": "missing"}
    if state["state"] != "done" or not metrics.exists():
        sys.exit(f"{folder}: the run ended {state['state']}: {state.get('reason', '')}")
    return [r for r in map(json.loads, metrics.read_text().splitlines()) if r["kind"] == "train"]


def relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(a), abs(b), 1e-12)


def max_weight_difference(a: Path, b: Path) -> float:
    wa, wb = (torch.load(f / "checkpoints" / "last.pt", map_location="cpu", weights_only=False)["model"]
              for f in (a, b))
    return max(float((wa[k].float() - wb[k].float()).abs().max()) for k in wa)


def equality(args: argparse.Namespace) -> int:
    ref, run = run_dir(args.ref), run_dir(args.run)
    expected, got = train_lines(ref), train_lines(run)
    if [r["step"] for r in expected] != [r["step"] for r in got]:
        sys.exit(f"equality: the runs logged different steps: {len(expected)} and {len(got)} train lines")
    rows, failures = [], []
    for exp, act in zip(expected, got):
        row = {"step": exp["step"], "loss_1": exp["loss"], "loss_2": act["loss"],
               "loss_rel": relative(exp["loss"], act["loss"]), "grad_norm_rel": relative(exp["grad_norm"], act["grad_norm"]),
               "same_samples": all(exp[k] == act[k] for k in SAMPLED)}
        rows.append(row)
        if not row["same_samples"]:
            failures.append(f"step {row['step']}: the sampled batches differ ({', '.join(SAMPLED)})")
        for key in ("loss_rel", "grad_norm_rel"):
            if row[key] > args.rel:
                failures.append(f"step {row['step']}: {key} {row[key]:.2e} > {args.rel:.0e}")
    dw = max_weight_difference(ref, run)
    first, second = args.labels.split(",")
    table = [f"| step | loss ({first}) | loss ({second}) | loss rel. diff | grad norm rel. diff | same samples |",
             "|---:|---:|---:|---:|---:|:---:|"]
    table += [f"| {r['step']} | {r['loss_1']:.6g} | {r['loss_2']:.6g} | {r['loss_rel']:.2e} | {r['grad_norm_rel']:.2e} "
              f"| {'yes' if r['same_samples'] else 'NO'} |" for r in rows]
    verdict = "PASS" if not failures else "FAIL: " + "; ".join(failures[:3])
    table += ["", f"final max |dw| = {dw:.3e}; tolerance {args.rel:.0e} relative: {verdict}"]
    emit(args.out, args.name, "\n".join(table), {"rows": rows, "max_abs_dw": dw, "rel": args.rel,
                                                  "pass": not failures, "failures": failures})
    return 0 if not failures else 1


@dataclass
class Throughput:
    setting: str
    trainer_ranks: int
    generator_gpus: int
    updates: int
    samples_per_s: float
    mean_step_s: float
    devices_counted: float
    unit: str


def measure(label: str, generator_gpus: int, folder: Path, warmup: int) -> Throughput:
    lines = train_lines(folder)[warmup:]
    if not lines:
        sys.exit(f"{folder}: no train line after {warmup} warm-up updates")
    seconds = sum(r["step_seconds"] for r in lines)
    samples = sum(r["samples_per_s"] * r["step_seconds"] for r in lines)
    before = train_lines(folder)[warmup - 1] if warmup else {"gpu_hours": 0.0, "core_hours": 0.0}
    unit = "gpu_hours" if "gpu_hours" in lines[-1] else "core_hours"
    measured = (lines[-1][unit] - before[unit]) * 3600 / max(1e-9, seconds - sum(r["compile_s"] for r in lines))
    return Throughput(label, int(lines[-1].get("tasks_per_node", 1)), generator_gpus, len(lines), samples / seconds,
                      seconds / len(lines), measured, unit)


def throughput(args: argparse.Namespace) -> int:
    results = []
    for item in args.runs:
        label, _, path = item.partition("=")
        name, _, gens = label.partition(":")
        results.append(measure(name, int(gens or 0), run_dir(path), args.warmup))
    unit = "GPUs" if results[0].unit == "gpu_hours" else "cores"
    table = [f"| setting | trainer ranks | generator GPUs | updates measured | samples/s | mean RL step s | "
             f"{unit} counted |", "|---|---:|---:|---:|---:|---:|---:|"]
    table += [f"| {r.setting} | {r.trainer_ranks} | {r.generator_gpus} | {r.updates} | {r.samples_per_s:.1f} | "
              f"{r.mean_step_s:.3f} | {r.devices_counted:.2f} |" for r in results]
    ratio = results[-1].samples_per_s / results[0].samples_per_s
    table += ["", f"samples/s {results[-1].setting} / {results[0].setting} = {ratio:.2f}x "
                  f"(target >= {THROUGHPUT_TARGET}x: {'met' if ratio >= THROUGHPUT_TARGET else 'NOT met'})"]
    emit(args.out, "throughput", "\n".join(table), {"runs": [asdict(r) for r in results], "ratio": ratio,
                                                    "target": THROUGHPUT_TARGET, "warmup": args.warmup})
    return 0


def emit(out: str, name: str, markdown: str, record: dict) -> None:
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.md").write_text(markdown + "\n")
    (folder / f"{name}.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"## {name}\n\n{markdown}\n", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    spec = sub.add_parser("spec")
    spec.add_argument("file", type=Path)
    spec.add_argument("name")
    spec.add_argument("ranks", type=int)
    spec.add_argument("overrides", nargs="*")
    eq = sub.add_parser("equality")
    eq.add_argument("ref")
    eq.add_argument("run")
    eq.add_argument("--out", required=True)
    eq.add_argument("--rel", type=float, default=1e-4)
    eq.add_argument("--name", default="equality", help="the table's file name (OUT/NAME.md and .json)")
    eq.add_argument("--labels", default="1 rank,2 ranks", help="the two runs' names in the table, comma separated")
    tp = sub.add_parser("throughput")
    tp.add_argument("runs", nargs="+", help="LABEL:GENERATOR_GPUS=RUN_OR_SWEEP_FOLDER, the baseline first")
    tp.add_argument("--out", required=True)
    tp.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()
    if args.command == "spec":
        write_spec(args.file, args.name, args.ranks, args.overrides)
        return 0
    return equality(args) if args.command == "equality" else throughput(args)


if __name__ == "__main__":
    sys.exit(main())
