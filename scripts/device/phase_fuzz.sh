#!/usr/bin/env bash
# Device phase (accelerator machine; the lead runs it beside other throughput phases: at most 6 processes): the
# libFuzzer targets of .stage_fuzz/fuzz.tar.xz (scripts/device/stage_fuzz.sh) in parallel, N processes per target,
# each on its own scratch copy of the committed seeds (tests/fuzz/corpus/TARGET) with its own -seed, for SECONDS
# each. Writes under $OUT/fuzz/: TARGET.pN.log (libFuzzer's output with -print_final_stats), crash/leak/timeout/oom
# files as TARGET.pN.<kind>-<sha1>, corpus_TARGET.tar.gz (the processes' corpora), and summary.txt: per target the
# executions summed over its processes, the slowest process's rate, the artifact count. Exit status 0 when no
# process found anything. Needs only .stage_fuzz and .gl (not .stage/ or the prelude).
# Usage there: bash scripts/device/phase_fuzz.sh [SECONDS] [TARGET:N,...]
#   (default 400 s and idx:2,digits:2,image:1,debugger:1 = 6 processes: the targets short of 10^6 executions,
#   the slowest ones twice; about 7 min wall)
# Locally (no device): SG_FUZZ_BIN=build-san/bin bash scripts/device/phase_fuzz.sh 10 idx:1
set -uo pipefail
secs=${1:-400}
spec=${2:-idx:2,digits:2,image:1,debugger:1}
out=${OUT:-/tmp/out}/fuzz
mkdir -p "$out"
if [ -n "${SG_FUZZ_BIN:-}" ]; then
  bin=$(cd "$SG_FUZZ_BIN" && pwd)
else
  for f in .gl/*.deb; do [ -f "$f" ] && dpkg -x "$f" /; done
  ldconfig 2>/dev/null || true
  rm -rf /opt/sgfuzz && mkdir -p /opt/sgfuzz && tar -C /opt/sgfuzz -xJf .stage_fuzz/fuzz.tar.xz || { echo "no .stage_fuzz/fuzz.tar.xz"; exit 2; }
  bin=/opt/sgfuzz/fuzz/bin
  export LD_LIBRARY_PATH=/opt/sgfuzz/fuzz/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
nproc | sed 's/^/cores: /'
declare -A nprocs
targets=()
for tn in ${spec//,/ }; do targets+=("${tn%%:*}"); nprocs[${tn%%:*}]=${tn##*:}; done
scratch=/dev/shm/sgfuzz
mkdir -p "$scratch" 2>/dev/null && touch "$scratch/.w" 2>/dev/null || scratch=/tmp/sgfuzz
rm -rf "$scratch" && mkdir -p "$scratch"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
pids=()
for t in "${targets[@]}"; do
  [ -x "$bin/fuzz_$t" ] || { echo "fuzz_$t: not staged (skipped)"; continue; }
  "$bin/fuzz_$t" -runs=0 "tests/fuzz/corpus/$t" > "$out/$t.replay.log" 2>&1 || echo "fuzz_$t: the seed replay FAILED ($out/$t.replay.log)"
  for p in $(seq 1 "${nprocs[$t]}"); do
    d="$scratch/$t.p$p"
    mkdir -p "$d/corpus" "$d/tmp" && cp -r "tests/fuzz/corpus/$t/." "$d/corpus/"
    TMPDIR="$d/tmp" timeout $((secs + 60)) "$bin/fuzz_$t" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 \
      -print_final_stats=1 -seed=$((1000 * p + ${#t})) -artifact_prefix="$out/$t.p$p." "$d/corpus" \
      > "$out/$t.p$p.log" 2>&1 &
    pids+=($!)
  done
done
for pid in "${pids[@]}"; do wait "$pid"; done
status=0
{
  echo "fuzz campaign: $(date -u +%FT%TZ), $(nproc) cores, $secs s per process"
  for t in "${targets[@]}"; do
    [ -x "$bin/fuzz_$t" ] || continue
    execs=0 rate_min=
    for log in "$out/$t".p*.log; do
      e=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
      r=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
      execs=$((execs + ${e:-0}))
      [ -n "$r" ] && { [ -z "$rate_min" ] || [ "$r" -lt "$rate_min" ]; } && rate_min=$r
    done
    arts=$(find "$out" -maxdepth 1 -name "$t.p*.*-*" -type f | wc -l)
    added=$(cat "$scratch/$t".p*/corpus/* 2>/dev/null | wc -c)
    tar -C "$scratch" -czf "$out/corpus_$t.tar.gz" $(cd "$scratch" && ls -d "$t".p*/corpus) 2>/dev/null
    echo "fuzz_$t: ${nprocs[$t]} processes, $execs executions in all, slowest ${rate_min:-?}/s, $arts artifacts, corpus bytes $added (seeds included)"
  done
} > "$out/summary.txt"
cat "$out/summary.txt"
grep -q ', 0 artifacts,' "$out/summary.txt" && ! grep -qv -e ', 0 artifacts,' -e '^fuzz campaign' "$out/summary.txt" || status=1
exit $status
