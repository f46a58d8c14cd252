#!/usr/bin/env bash
# Builds the browser demos of examples/web/ into OUT (serve it with `shadergrad serve OUT`):
#   OUT/index.html                 links to the demos
#   OUT/digits/                    draw-a-digit page (examples/web/digits/): bundle/ (shadergrad export of the
#                                  digits MLP 64-128-10 with train_debug, fresh init), pretrained.safetensors
#                                  (the shipped examples/web/digits/pretrained.safetensors: build/bin/digits_pretrain;
#                                  DIGITS_EPOCHS=N: shadergrad train --dataset digits --save), digits_subset.bin (the first N rows of
#                                  sklearn's digits.csv.gz: 64 counts 0..16 and the label, one byte each)
#   OUT/shapes/                    Worker CNN page (examples/web/shapes/): bundle/ of the 128x128 five-conv CNN
#                                  (infer only) with the shipped checkpoint examples/web/shapes/cnn5.safetensors
#                                  (`shadergrad train --model cnn5 --dataset shapes`, scripts/device/phase_cnn5.sh)
#   OUT/words/                     word-completion page (examples/web/words/ and the digits page's trainer.js, flow.js):
#                                  bundle/ (shadergrad export --model charlm --load examples/web/words/charlm.safetensors,
#                                  the shipped checkpoint: `shadergrad train --model charlm`, examples/web/README.md),
#                                  pretrained.safetensors (that checkpoint)
# Usage: scripts/build_web_demo.sh OUT [path/to/shadergrad]   (default build/bin/shadergrad)
# Env: DIGITS_EPOCHS=N to train the digits MLP here (shadergrad train, digits only) instead of shipping the
#      checkpoint, SUBSET (default 400 samples), SHAPES_EPOCHS=N to train the CNN here instead of
#      shipping the checkpoint, SKIP_SHAPES=1 to build only the digits page, SHAPES_UNTRAINED=1 to export the CNN's
#      fresh init, SHAPES_EXPORT_ARGS: more `export` flags for the CNN's bundle (e.g. --webgpu-cpu), SKIP_DIGITS=1 /
#      SKIP_WORDS=1 to leave those pages out, WORDS_BATCH: the words bundle's train batch (default 16), WORDS_EXPORT_ARGS: more
#      `export` flags for it.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:?usage: build_web_demo.sh OUT [shadergrad]}"
sg="${2:-$here/build/bin/shadergrad}"
[ -x "$sg" ] || { echo "build_web_demo.sh: $sg is missing: build the shadergrad target first" >&2; exit 2; }
csv=/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz
[ -f "$csv" ] || { echo "build_web_demo.sh: $csv is missing: install python3-sklearn (scripts/setup.sh)" >&2; exit 2; }
mkdir -p "$out"
cp "$here"/examples/web/index.html "$out/"

if [ "${SKIP_WORDS:-0}" != 1 ]; then
  mkdir -p "$out/words"
  cp "$here"/examples/web/words/*.html "$here"/examples/web/words/*.js "$here"/examples/web/words/*.css "$out/words/"
  cp "$here"/examples/web/digits/trainer.js "$here"/examples/web/digits/flow.js "$out/words/"
  wload=()
  if [ -f "$here/examples/web/words/charlm.safetensors" ]; then
    wload=(--load "$here/examples/web/words/charlm.safetensors")
    cp "$here/examples/web/words/charlm.safetensors" "$out/words/pretrained.safetensors"
  fi
  # shellcheck disable=SC2086
  "$sg" export --model charlm "${wload[@]}" --batch "${WORDS_BATCH:-16}" --infer-batch 8 --lr 0.002 --check-steps 1 \
    ${WORDS_EXPORT_ARGS:-} --out "$out/words/bundle" > /dev/null
fi

if [ "${SKIP_DIGITS:-0}" != 1 ]; then
mkdir -p "$out/digits"
cp "$here"/examples/web/digits/*.html "$here"/examples/web/digits/*.js "$here"/examples/web/digits/*.css "$out/digits/"

# the pretrained digits MLP: the shipped checkpoint (examples/digits_pretrain.cpp, examples/web/README.md), or with
# DIGITS_EPOCHS=N one trained here on the digits alone; then the bundle with the same structure and a fresh init
if [ -n "${DIGITS_EPOCHS:-}" ] || [ ! -f "$here/examples/web/digits/pretrained.safetensors" ]; then
  "$sg" train --model mlp --dataset digits --epochs "${DIGITS_EPOCHS:-30}" --batch 32 --backend cpu --quiet \
    --save "$out/digits/pretrained.safetensors"
else
  cp "$here/examples/web/digits/pretrained.safetensors" "$out/digits/"
fi
"$sg" export --model mlp --dataset digits --batch 16 --infer-batch 1 --lr 0.003 --debug-program --check-steps 1 \
  --out "$out/digits/bundle" > /dev/null
# the shipped subset: 64 counts and the label per sample, one byte each
python3 - "$csv" "$out/digits/digits_subset.bin" "${SUBSET:-400}" <<'PY'
import csv, gzip, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = []
with gzip.open(src, 'rt') as f:
    for r in csv.reader(f):
        if len(r) == 65: rows.append(bytes(int(float(v)) for v in r))
        if len(rows) == n: break
open(dst, 'wb').write(b''.join(rows))
PY
fi

if [ "${SKIP_SHAPES:-0}" != 1 ]; then
  mkdir -p "$out/shapes"
  cp "$here"/examples/web/shapes/*.html "$here"/examples/web/shapes/*.js "$out/shapes/"
  load=()
  if [ "${SHAPES_UNTRAINED:-0}" = 1 ]; then  # SHAPES_UNTRAINED=1: the fresh init
    :
  elif [ -n "${SHAPES_EPOCHS:-}" ]; then    # SHAPES_EPOCHS=N: trained here (slow on a CPU: ~0.2 steps/s)
    "$sg" train --model cnn5 --dataset shapes --epochs "$SHAPES_EPOCHS" --batch 32 --lr 0.003 --quiet \
      --save "$out/shapes/cnn5.safetensors"
    load=(--load "$out/shapes/cnn5.safetensors")
  elif [ -f "$here/examples/web/shapes/cnn5.safetensors" ]; then  # the shipped checkpoint (examples/web/README.md)
    cp "$here/examples/web/shapes/cnn5.safetensors" "$out/shapes/"
    load=(--load "$out/shapes/cnn5.safetensors")
  fi
  # SHAPES_EXPORT_ARGS: more export flags for the CNN's bundle (benchmarks: e.g. --webgpu-cpu)
  # shellcheck disable=SC2086
  "$sg" export --model cnn5 --dataset shapes "${load[@]}" --infer-batch 1 --infer-only ${SHAPES_EXPORT_ARGS:-} \
    --out "$out/shapes/bundle" > /dev/null
fi
echo "built the web demos in $out: serve them with: $sg serve $out"
