#!/usr/bin/env bash
# bench/run_all.sh — runs our benchmark (bench_ops) and the PyTorch peer (bench/peers.py) in one go, then prints
# the ratios ours / torch side by side (issue 8).
#
# usage: bench/run_all.sh [--bin DIR] [--out DIR] [--python PY] [--backend gles|cpu|both] [--device cpu|cuda|both|auto]
#                         [--repeats N] [--warmup N] [--max-seconds S] [--large] [--sgemm N,N,..] [--only CASES]
#   --bin DIR      where bench_ops is (default: build-bench/bin under the repo root)
#   --out DIR      where ours.json, peers.json and the logs go (default: a new directory under /tmp)
#   --python PY    the Python with torch (default: /usr/bin/python3 when it imports torch, else python3)
#   --backend X    bench_ops only;  --device X  peers.py only
#   --only CASES   bench_ops' cases; peers.py gets those it has (sgemm, mlp, cnn, charlm, lstm, resnet), none: all
#   --repeats / --warmup / --max-seconds / --large / --sgemm  go to both
# Exit status: bench_ops' status (1 when one of its correctness checks failed), else peers.py's.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin="$root/build-bench/bin"
out=""
py=""
ours_args=()
peer_args=()
both_args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --python) py="$2"; shift 2 ;;
    --backend|--probe-side|--probe-sgemm) ours_args+=("$1" "$2"); shift 2 ;;
    --only)
      ours_args+=("$1" "$2")
      peer_only=$(tr ',' '\n' <<<"$2" | grep -xE 'sgemm|mlp|cnn|charlm|lstm|resnet' | paste -sd, -)
      [[ -n "$peer_only" ]] && peer_args+=(--only "$peer_only")
      shift 2 ;;
    --device|--threads) peer_args+=("$1" "$2"); shift 2 ;;
    --repeats|--warmup|--max-seconds|--sgemm) both_args+=("$1" "$2"); shift 2 ;;
    --large) both_args+=("$1"); shift ;;
    -h|--help) sed -n '2,15p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "run_all.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

if [[ ! -x "$bin/bench_ops" ]]; then
  echo "run_all.sh: $bin/bench_ops not found; build it: cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release && ninja -C build-bench bench_ops" >&2
  exit 2
fi
if [[ -z "$py" ]]; then
  if /usr/bin/python3 -c 'import torch' 2>/dev/null; then py=/usr/bin/python3; else py=python3; fi
fi
if [[ -z "$out" ]]; then out=$(mktemp -d /tmp/sg_bench.XXXXXX); fi
mkdir -p "$out"

echo "== machine: $(uname -n), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "== load average: $(cat /proc/loadavg)"
echo "== git: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$root" diff --quiet 2>/dev/null || echo ' (working tree has local changes)')"
if command -v update-alternatives >/dev/null 2>&1; then
  echo "== BLAS for Debian's torch: $(update-alternatives --query libblas.so.3-x86_64-linux-gnu 2>/dev/null | sed -n 's/^Value: //p')"
fi
echo

echo "== ours: $bin/bench_ops ${ours_args[*]} ${both_args[*]} --json $out/ours.json"
"$bin/bench_ops" "${ours_args[@]}" "${both_args[@]}" --json "$out/ours.json" 2>&1 | tee "$out/ours.log"
ours_rc=${PIPESTATUS[0]}
echo

echo "== peer: $py $root/bench/peers.py ${peer_args[*]} ${both_args[*]} --json $out/peers.json"
PYTHONUNBUFFERED=1 "$py" "$root/bench/peers.py" "${peer_args[@]}" "${both_args[@]}" --json "$out/peers.json" 2>&1 |
  tee "$out/peers.log"
peer_rc=${PIPESTATUS[0]}
echo

if [[ -f "$out/ours.json" && -f "$out/peers.json" ]]; then
  echo "== ratios"
  "$py" "$root/bench/peers.py" --join "$out/ours.json" "$out/peers.json" | tee "$out/ratios.txt"
else
  echo "== no ratios: a JSON file is missing (ours rc $ours_rc, peer rc $peer_rc)"
fi
echo
echo "results in $out"
if [[ $ours_rc -ne 0 ]]; then exit "$ours_rc"; fi
exit "$peer_rc"
