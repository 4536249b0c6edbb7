#!/usr/bin/env bash
# A session's GPU work as one queue file, run on a lent GPU machine by a detached runner (setsid), so it
# outlives the device call that starts it and each later call only waits, shows progress and packs.
#
#   bash bench/device_queue.sh start QUEUE   # start the runner unless one runs: QUEUE's commands in order,
#                                            # each skipped when it ended with 0 under an earlier start
#   bash bench/device_queue.sh wait SECS     # a progress line every TICK (30) s until the queue ends or SECS
#                                            # pass, then pack
#   bash bench/device_queue.sh pack          # $WORK/queue (logs, exit codes, results) -> $OUT/queue.tar.gz
#
# QUEUE: one shell command per line, run with bash from the source tree, `$RES` the folder for its results;
# lines starting with `#` and blank lines are skipped. Command N's output goes to $WORK/queue/N.log and its exit
# status to N.rc. Environment: WORK (default /tmp/queue-work), OUT (default $WORK/out), the packages of
# `bash bench/smollm2_study.sh setup` (bench/lib/device_env.sh). Queues of bench/queues/ say what they measure.
set -uo pipefail
STAGE=${1:?stage}
SRC=$(cd "$(dirname "$0")/.." && pwd)
WORK=${WORK:-/tmp/queue-work}
OUT=${OUT:-$WORK/out}
TICK=${TICK:-30}
Q=$WORK/queue
export RES=$Q/res
mkdir -p "$RES" "$OUT"
. "$SRC/bench/lib/device_env.sh"

running() { [ -f "$Q/runner.pid" ] && kill -0 "$(cat "$Q/runner.pid")" 2>/dev/null; }

commands() { grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' "$Q/queue.txt"; }

run_queue() {  # the runner: every command not yet ended with 0, in order
  local n=0 cmd
  while IFS= read -r cmd; do
    n=$((n + 1))
    [ "$(cat "$Q/$n.rc" 2>/dev/null)" = 0 ] && continue
    echo "$n" > "$Q/current"
    (cd "$SRC" && bash -c "$cmd") > "$Q/$n.log" 2>&1 < /dev/null
    echo $? > "$Q/$n.rc.tmp" && mv "$Q/$n.rc.tmp" "$Q/$n.rc"
  done < <(commands)
  rm -f "$Q/current"
}

progress() {  # one line: elapsed, the command running and the last line of its log
  local total; total=$(commands | wc -l)
  local done; done=$(ls "$Q"/*.rc 2>/dev/null | wc -l)
  if [ -f "$Q/current" ]; then
    local n; n=$(cat "$Q/current")
    local last; last=$(tail -c 2000 "$Q/$n.log" 2>/dev/null | tr '\r' '\n' | grep -v '^[[:space:]]*$' | tail -1)
    local cmd; cmd=$(commands | sed -n "${n}p" | cut -c1-70)
    echo "[$(( $(date +%s) - $1 )) s] $done/$total ended; running $n: $cmd | ${last:0:120}"
  else
    echo "[$(( $(date +%s) - $1 )) s] $done/$total ended; runner $(running && echo finishing || echo stopped)"
  fi
}

pack() {
  for rc in "$Q"/*.rc; do [ -f "$rc" ] && echo "$(basename "$rc" .rc): exit $(cat "$rc")"; done
  tar czf "$OUT/queue.tar.gz.tmp" -C "$WORK" queue && mv "$OUT/queue.tar.gz.tmp" "$OUT/queue.tar.gz"
  ls -l "$OUT/queue.tar.gz"
}

case "$STAGE" in
  start)
    if running; then echo "the runner is running (pid $(cat "$Q/runner.pid"))"; exit 0; fi
    cp "${2:?queue file}" "$Q/queue.txt"
    setsid nohup bash "$0" run > "$Q/runner.log" 2>&1 < /dev/null &
    echo $! > "$Q/runner.pid"
    echo "runner $! started: $(commands | wc -l) commands, results in $RES"
    ;;
  run) run_queue ;;
  wait)
    start=$(date +%s); deadline=$(( start + ${2:?seconds} ))
    next=$start
    while running && [ "$(date +%s)" -lt "$deadline" ]; do
      [ "$(date +%s)" -ge "$next" ] && { progress "$start"; next=$(( next + TICK )); }
      sleep 1
    done
    progress "$start"
    pack
    ;;
  pack) pack ;;
  *) echo "unknown stage $STAGE (start, wait, pack)"; exit 2 ;;
esac
