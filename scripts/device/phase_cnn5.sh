#!/usr/bin/env bash
# Device phase of branch webapp2 (issue 17): trains the shapes page's CNN (sg::nn::make_cnn5, 128x128, 4 classes)
# natively on the H200's Vulkan driver, on the generated shapes task (sg::data::make_shapes: train 2048 samples
# seed 1, test 512 seed 2), and writes the checkpoints, metrics and logs to $OUT/cnn5/. Finishes in < 6 min:
#   1. a calibration run of 2 epochs (batch 32) gives the seconds of one epoch (the second's) and the fixed cost of a
#      run (data generation, kernel compiles, evaluation);
#   2. four configurations, each with as many epochs as fit in ~60 s by the calibration (at most the cap given),
#      each under a 75 s `timeout` hang guard: Adam lr 3e-3 batch 32 seed 0 for at most 30 epochs; Adam lr 1e-3
#      batch 32 seed 1 (cap 150); Adam lr 3e-3 batch 32 seed 2 (cap 600); Adam lr 1e-2 batch 64 seed 3 (cap 600).
#      With 2048 training samples and 5,436 parameters a long run may overfit: the metrics' per-epoch test accuracy
#      shows where, and the caps give checkpoints at several lengths.
# The checkpoint with the highest test accuracy is the page's (examples/web/shapes/cnn5.safetensors, chosen by the
# helper after the run; tests/test_web_app.cpp re-measures it on another generated set, seed 3, CPU backend).
# Usage there (staged tree, stage target shadergrad): . scripts/device/h200_prelude.sh; bash scripts/device/phase_cnn5.sh
set -uo pipefail
o="${OUT:?OUT must be set}/cnn5"
mkdir -p "$o"
exec > >(tee -a "$o/phase.log") 2>&1
echo "phase_cnn5: $(date -u +%FT%TZ) on $(hostname); shadergrad $(command -v shadergrad)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true

train() {  # NAME LIMIT_S ARGS...
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  timeout "$limit" shadergrad train --model cnn5 --dataset shapes --backend vulkan "$@" \
    --metrics "$o/$name.json" --save "$o/$name.safetensors" > "$o/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc after $((SECONDS - t0)) s: $(tail -1 "$o/$name.log")"
  return $rc
}

t0=$SECONDS
train calib 45 --epochs 2 --batch 32 --lr 0.003 --seed 0 --quiet ||
  { echo "phase_cnn5: the calibration run failed; its log:"; cat "$o/calib.log"; exit 1; }
wall=$((SECONDS - t0))
# an epoch = its train steps (the second epoch's seconds, x1.5 for the evaluation after it); the fixed cost = the
# run's wall time minus its epochs' seconds
read -r per_epoch fixed < <(python3 -c "import json;h=json.load(open('$o/calib.json'))['history']
print(1.5 * h[1]['seconds'], max(0, $wall - sum(e['seconds'] for e in h)))")
echo "calibration: $per_epoch s per epoch at batch 32 (evaluation included), $fixed s fixed per run"

# ep B CAP: epochs at batch B (2048/B steps each; an epoch's time scales about with its step count at these batches)
ep() { python3 -c "print(max(2, min($2, int((60 - $fixed) / max($per_epoch * 32 / $1, 1e-3)))))"; }
train adam3e-3_b32_e30 75 --epochs "$(ep 32 30)" --batch 32 --lr 0.003 --seed 0 --quiet
train adam1e-3_b32 75 --epochs "$(ep 32 150)" --batch 32 --lr 0.001 --seed 1 --quiet
train adam3e-3_b32 75 --epochs "$(ep 32 600)" --batch 32 --lr 0.003 --seed 2 --quiet
train adam1e-2_b64 75 --epochs "$(ep 64 600)" --batch 64 --lr 0.01 --seed 3 --quiet
python3 - "$o" <<'PY'
import json, os, sys
o = sys.argv[1]
for n in ('calib', 'adam3e-3_b32_e30', 'adam1e-3_b32', 'adam3e-3_b32', 'adam1e-2_b64'):
    p = os.path.join(o, n + '.json')
    if not os.path.exists(p): print(f'{n}: no metrics'); continue
    m = json.load(open(p))
    h = m['history']
    print(f"{n}: epochs {m['epochs']}, steps {m['steps']}, {m['steps_per_second']:.1f} steps/s, test accuracy "
          f"{m['test_accuracy']:.4f} (best epoch {max(h, key=lambda e: e['test_accuracy'])['epoch']}: "
          f"{max(e['test_accuracy'] for e in h):.4f}), final train loss {m['final_train_loss']:.4f}, "
          f"renderer {m['renderer']}")
PY
ls -la "$o"
