#!/usr/bin/env bash
# A run's job over several trainer ranks, through `rlscale sweep ... launcher=local` (submitit local jobs of
# launcher.tasks_per_node tasks), on a lent 4-GPU machine whose cwd is this source tree:
#   equality    the DeepSpeed learner, synchronous (offpolicy=ppo, one batch per version): 1 trainer rank vs 2
#               (NCCL), same seed; per-step loss and grad-norm relative differences and the final max |dw|;
#               PASS within 1e-4 relative (fp32 policy and head, so only the reduction order differs)
#   generator task  PipelineRL with scheduled in-flight updates: 1 trainer + 1 generator process (GPU 1) vs
#               1 trainer + 1 generator task (launcher.generator_tasks=1: the weights broadcast over NCCL);
#               PASS as above
#   throughput  PipelineRL: 1 trainer + 1 generator GPU (gpus_per_node=2) vs 2 trainers + 2 generator GPUs
#               (gpus_per_node=4, trainer ranks on GPUs 0-1, generators on 2-3), as processes of rank 0 and as
#               generator tasks, same seed; samples/s and mean RL step after the warm-up updates, and the ratio
#               (target >= 1.6x)
# SmolLM2-135M-Instruct without thinking on sums99_chat, as sweeps/scale_sums_smollm2.yaml. The two equality
# runs share GPUs 0-2 and run first, side by side; the throughput runs follow one at a time on GPUs of their own.
# On a machine of 2 or 3 GPUs the equality runs go one after the other (GPU 0, then GPUs 0-1) and the throughput
# comparison, which needs 4, is skipped with a line that says so.
#
#   bash bench/multi_gpu_job.sh               # GPUs (needs /tmp/site from bench/smollm2_study.sh setup + join)
#   DEVICE=cpu bash bench/multi_gpu_job.sh    # rehearsal on CPU: the tiny model, gloo, fewer steps
#
# Environment: OUT (tables as .md and .json; default $WORK/out), WORK (default /tmp/multi_gpu_job), SITE
# (Python packages, default /tmp/site; DeepSpeed is installed there from KIT/whlds when missing), KIT (default:
# the parent of this tree), PYTHON, RUN_TIMEOUT (seconds per sweep), EQ_STEPS, TP_STEPS, WARMUP, TP_PROMPTS.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
KIT=${KIT:-$(dirname "$SRC")}
DEVICE=${DEVICE:-cuda}
WORK=${WORK:-/tmp/multi_gpu_job}
OUT=${OUT:-$WORK/out}
SITE=${SITE:-/tmp/site}
PY=${PYTHON:-python3}
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-/tmp/pycache}
export PYTHONPATH="$SITE:$SRC" PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 DS_BUILD_OPS=0
export TORCHINDUCTOR_COMPILE_THREADS=${TORCHINDUCTOR_COMPILE_THREADS:-4}
TABLE="$PY $SRC/bench/multi_gpu_table.py"
RESULTS=$WORK/results
SPECS=$WORK/specs
rm -rf "$RESULTS" "$SPECS" && mkdir -p "$RESULTS" "$SPECS" "$OUT"
START=$(date +%s)

die() { echo "multi_gpu_job: $*" >&2; exit 1; }

if [ "$DEVICE" = cuda ]; then
  EQ_STEPS=${EQ_STEPS:-10} TP_STEPS=${TP_STEPS:-40} WARMUP=${WARMUP:-5} TP_PROMPTS=${TP_PROMPTS:-32}
  RUN_TIMEOUT=${RUN_TIMEOUT:-170}
  COMMON=(model=smollm2 task=sums99_chat generation.think=false generation.max_answer_tokens=48 length=penalty
          length.l_max=48 length.l_cache=16 optim.lr=5e-6 task.val_size=64 trainer.eval_samples=1
          trainer.eval_samples_logged=0 engine.learner=deepspeed engine.device=cuda launcher=local
          cache_dir="$WORK/cache" seed=1)
  EQ=(model.dtype=float32 engine.compile=false batch.prompts=16 batch.generations=8 batch.micro_batch=64)
  TP=(model.dtype=bfloat16 batch.prompts="$TP_PROMPTS" batch.generations=8 batch.micro_batch=64 offpolicy.max_lag=8
      offpolicy.update_every_tokens=0)
else
  EQ_STEPS=${EQ_STEPS:-4} TP_STEPS=${TP_STEPS:-8} WARMUP=${WARMUP:-2} TP_PROMPTS=${TP_PROMPTS:-8}
  RUN_TIMEOUT=${RUN_TIMEOUT:-600}
  COMMON=(model=tiny task.val_size=16 engine.learner=deepspeed engine.device=cpu launcher=local cache_dir="$WORK/cache"
          seed=1)
  EQ=(batch.prompts=8)
  TP=(batch.prompts="$TP_PROMPTS" offpolicy.max_lag=2 offpolicy.update_every_tokens=0)
fi

# -- preflight: fail in seconds, not minutes ------------------------------------------------------------------
if ! "$PY" -c 'import deepspeed' 2>/dev/null; then
  ls "$KIT"/whlds/*.whl >/dev/null 2>&1 || die "DeepSpeed is not importable and $KIT/whlds/ holds no wheels"
  mkdir -p "$SITE"
  "$PY" -m pip install -q --no-index --no-deps --no-cache-dir --target "$SITE" "$KIT"/whlds/*.whl \
    || die "installing $KIT/whlds/*.whl into $SITE failed"
fi
"$PY" - "$DEVICE" <<'EOF' || die "preflight failed (above)"
import sys, torch, deepspeed, submitit, rlscale.cli  # noqa: F401
print(f"torch {torch.__version__}, deepspeed {deepspeed.__version__}, GPUs {torch.cuda.device_count()}")
if sys.argv[1] == "cuda":
    assert torch.cuda.device_count() >= 2, "needs 2 GPUs at least (4 for the throughput comparison)"
    from rlscale.engines.models.hf_model import smollm2_gguf_path
    print("SmolLM2:", "/".join(smollm2_gguf_path()))
EOF

# sweep NAME RANKS GPUS(CUDA_VISIBLE_DEVICES) OVERRIDE...: one run, waited for, its tail shown on failure
sweep() {
  local name=$1 ranks=$2 gpus=$3; shift 3
  $TABLE spec "$SPECS/$name.yaml" "$name" "$ranks" "${COMMON[@]}" "$@" || return 1
  local visible=(); [ "$DEVICE" = cuda ] && visible=(env CUDA_VISIBLE_DEVICES="$gpus")
  local t0=$(date +%s)
  "${visible[@]}" timeout "$RUN_TIMEOUT" "$PY" -m rlscale.cli sweep conf="$SPECS/$name.yaml" --results "$RESULTS" \
    > "$WORK/$name.log" 2>&1
  local rc=$?
  echo "$name: ${ranks} trainer rank(s), exit $rc after $(( $(date +%s) - t0 )) s"
  if [ $rc -ne 0 ] || ! grep -q '"state": "done"' "$RESULTS/$name"/*/status.json 2>/dev/null; then
    tail -20 "$WORK/$name.log"; cat "$RESULTS/$name"/*/status.json 2>/dev/null; echo
    find "$RESULTS/$name/.submitit" -name '*.err' -exec tail -15 {} \; 2>/dev/null
    return 1
  fi
}

# -- equality: 1 vs 2 trainer ranks, synchronous ----------------------------------------------------------------
SYNC=(offpolicy=ppo offpolicy.batches_per_version=1 trainer.max_steps="$EQ_STEPS" trainer.eval_every=1000
      trainer.checkpoint_every=1000 "${EQ[@]}")
GPUS=0; [ "$DEVICE" = cuda ] && GPUS=$("$PY" -c 'import torch; print(torch.cuda.device_count())')
if [ "$DEVICE" = cuda ] && [ "$GPUS" -lt 4 ]; then
  sweep eq1 1 0 launcher.gpus_per_node=1 "${SYNC[@]}" || die "the 1-rank equality run failed"
  sweep eq2 2 0,1 launcher.gpus_per_node=2 "${SYNC[@]}" || die "the 2-rank equality run failed"
elif [ "$DEVICE" = cuda ]; then
  sweep eq1 1 0 launcher.gpus_per_node=1 "${SYNC[@]}" & one=$!
  sweep eq2 2 1,2 launcher.gpus_per_node=2 "${SYNC[@]}" & two=$!
  wait $one || die "the 1-rank equality run failed"
  wait $two || die "the 2-rank equality run failed"
else
  sweep eq1 1 "" "${SYNC[@]}" || die "the 1-rank equality run failed"
  sweep eq2 2 "" "${SYNC[@]}" || die "the 2-rank equality run failed"
fi
$TABLE equality "$RESULTS/eq1" "$RESULTS/eq2" --out "$OUT"; EQUAL=$?

# -- generator task: 1 trainer + 1 generator process vs 1 trainer + 1 generator task (launcher.generator_tasks) ---
TASK=(offpolicy=pipeline offpolicy.update_every_tokens=16 offpolicy.num_generators=1 trainer.max_steps="$EQ_STEPS"
      trainer.eval_every=1000 trainer.checkpoint_every=1000 "${EQ[@]}")
if [ "$DEVICE" = cuda ]; then
  sweep gp 1 0,1 launcher.gpus_per_node=2 "${TASK[@]}" || die "the run with a generator process failed"
  sweep gt 2 0,1 launcher.gpus_per_node=2 launcher.generator_tasks=1 "${TASK[@]}" \
    || die "the run with a generator task failed"
else
  sweep gp 1 "" "${TASK[@]}" || die "the run with a generator process failed"
  sweep gt 2 "" launcher.generator_tasks=1 "${TASK[@]}" || die "the run with a generator task failed"
fi
$TABLE equality "$RESULTS/gp" "$RESULTS/gt" --out "$OUT" --name equality-generator-task \
  --labels "generator process,generator task"; TASK_EQUAL=$?

# -- throughput: PipelineRL 1 trainer + 1 generator vs 2 + 2 ----------------------------------------------------
PIPE=(offpolicy=pipeline trainer.max_steps="$TP_STEPS" trainer.eval_every=1000 trainer.checkpoint_every=1000 "${TP[@]}")
if [ "$DEVICE" = cuda ] && [ "$GPUS" -lt 4 ]; then
  echo "multi_gpu_job: throughput skipped: 1+1 against 2+2 needs 4 GPUs, this machine has $GPUS"
elif [ "$DEVICE" = cuda ]; then
  sweep tp11 1 0,1 launcher.gpus_per_node=2 offpolicy.num_generators=1 "${PIPE[@]}" || die "the 1+1 run failed"
  sweep tp22t 4 0,1,2,3 launcher.gpus_per_node=4 launcher.generator_tasks=2 offpolicy.num_generators=2 "${PIPE[@]}" \
    || die "the 2+2 run with generator tasks failed"
  sweep tp22 2 0,1,2,3 launcher.gpus_per_node=4 offpolicy.num_generators=2 "${PIPE[@]}" || die "the 2+2 run failed"
  GENS=(1 2)
else
  sweep tp11 1 "" offpolicy.num_generators=1 "${PIPE[@]}" || die "the 1+1 run failed"
  sweep tp22 2 "" offpolicy.num_generators=2 "${PIPE[@]}" || die "the 2+2 run failed"
  GENS=(0 0)
fi
if [ -n "${GENS+x}" ]; then
  TASKS_ROW=(); [ -d "$RESULTS/tp22t" ] && TASKS_ROW=("2+2 generator tasks:${GENS[1]}=$RESULTS/tp22t")
  $TABLE throughput --warmup "$WARMUP" --out "$OUT" "1+1:${GENS[0]}=$RESULTS/tp11" "${TASKS_ROW[@]}" \
    "2+2:${GENS[1]}=$RESULTS/tp22" \
    || die "throughput table failed"
fi
echo "multi_gpu_job: $(( $(date +%s) - START )) s in all; tables in $OUT"
[ $EQUAL -eq 0 ] || die "equality FAILED (table above)"
[ $TASK_EQUAL -eq 0 ] || die "equality with a generator task FAILED (table above)"
