#!/usr/bin/env bash
# Runs bench_seed002 jobs in parallel, each in its own process writing its own JSON (merge them with
# scripts/seed002/merge.py). A job file holds one job a line:  NAME BACKEND ARGS...  (ARGS: bench_seed002's, without
# --backend and --out; blank lines and # comments skipped). Jobs start in file order, at most PARALLEL at a time; a
# job not started by DEADLINE (seconds since the epoch, 0 = none) is skipped, and a running one is stopped there.
#   scripts/seed002/run_jobs.sh JOBS OUTDIR PARALLEL [DEADLINE]
# Writes OUTDIR/NAME.json, OUTDIR/logs/NAME.log and one line per job in OUTDIR/jobs.tsv:
#   name  backend  rc (124 = stopped at the deadline, skipped = never started)  wall seconds  args
# bench_seed002 is taken from $SEED002_BIN (default: the one on PATH). Extra bench arguments for every job (smoke
# settings such as --epoch-scale 0.01 --teacher 4,8,16) come from $SEED002_ARGS.
set -uo pipefail
jobs_file=$1 out=$2 parallel=$3 deadline=${4:-0}
bin=${SEED002_BIN:-bench_seed002}
mkdir -p "$out/logs"
[ -f "$out/jobs.tsv" ] || printf 'name\tbackend\trc\twall_s\targs\n' > "$out/jobs.tsv"

run_one() {  # name backend args...
  local name=$1 backend=$2; shift 2
  local now left t0 rc ms
  now=$(date +%s)
  if [ "$deadline" -gt 0 ] && [ "$now" -ge "$deadline" ]; then
    printf '%s\t%s\tskipped\t0\t%s\n' "$name" "$backend" "$*" >> "$out/jobs.tsv"
    return
  fi
  left=$(( deadline > 0 ? deadline - now : 86400 ))
  t0=$(date +%s%N)
  # shellcheck disable=SC2086
  timeout -k 5 "$left" "$bin" --backend "$backend" "$@" ${SEED002_ARGS:-} --out "$out/$name.json" \
    > "$out/logs/$name.log" 2>&1
  rc=$?
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  printf '%s\t%s\t%s\t%d.%d\t%s\n' "$name" "$backend" "$rc" $((ms / 1000)) $((ms % 1000 / 100)) "$*" >> "$out/jobs.tsv"
}

running=0
while read -r name backend args; do
  case "$name" in ''|'#'*) continue ;; esac
  while [ "$running" -ge "$parallel" ]; do wait -n; running=$((running - 1)); done
  # shellcheck disable=SC2086
  run_one "$name" "$backend" $args < /dev/null &
  running=$((running + 1))
done < "$jobs_file"
wait
