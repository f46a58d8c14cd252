#!/usr/bin/env bash
# Runs shadergrad's libFuzzer targets long, one at a time, at low CPU priority (docs/RELIABILITY.md).
#
# Usage: scripts/fuzz.sh [-t SECONDS | -r RUNS] [TARGET ...]     (default: 600 s each, every target)
#   TARGET: safetensors idx image digits kernel_cache debugger (tests/fuzz/fuzz_TARGET.cpp)
# Builds build-fuzz/ (clang-14, -DSG_FUZZ=ON: ASan + UBSan + libFuzzer) when needed. New inputs go to
# build-fuzz/corpus/TARGET (the committed seeds in tests/fuzz/corpus/TARGET are read, never written); crashes to
# build-fuzz/artifacts/TARGET/. Prints one line per target: executions, seconds, corpus size, crashes.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=(-max_total_time=600)
while getopts "t:r:" o; do
  case $o in
    t) limit=(-max_total_time="$OPTARG") ;;
    r) limit=(-runs="$OPTARG") ;;
    *) echo "usage: scripts/fuzz.sh [-t SECONDS | -r RUNS] [TARGET ...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in tests/fuzz/fuzz_*.cpp; do t=${f##*/fuzz_}; targets+=("${t%.cpp}"); done
fi
if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DSG_FUZZ=ON -DSG_BUILD_TESTS=OFF \
    -DSG_BUILD_EXAMPLES=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
nice -n 10 cmake --build build-fuzz --target "${targets[@]/#/fuzz_}"
status=0
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t" "build-fuzz/artifacts/$t"
  log="build-fuzz/fuzz_$t.log"
  set +e
  nice -n 10 "build-fuzz/bin/fuzz_$t" "${limit[@]}" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="build-fuzz/artifacts/$t/" "build-fuzz/corpus/$t" "tests/fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  secs=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  crashes=$(find "build-fuzz/artifacts/$t" -type f | wc -l)
  units=$(find "build-fuzz/corpus/$t" -type f | wc -l)
  echo "fuzz_$t: exit $rc, $execs executions ($secs/s), corpus +$units, $crashes crash/leak/timeout artifacts (log $log)"
  [ "$rc" -eq 0 ] || status=1
done
exit $status
