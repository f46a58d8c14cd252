#!/usr/bin/env bash
# Seed 002's study on the H200 machine (branch seed002, issue 18): every (table, seed) job of the tables still
# missing in docs/RESULTS.md, in parallel, one bench_seed002 process per job; JSON under $OUT/seed002/.
# Stage targets: bench_seed002 (scripts/device/stage.sh bench_seed002 packs it with the digits CSV; the seed002
# split is compiled in). Run from the staged tree:  bash scripts/device/phase_seed002.sh
#   1. trial (<= 75 s): 3 short student jobs on vulkan and 3 on cpu at once, one short teacher job on each; the
#      faster backend per job class (student-size, teacher-size) runs that class below (trial.txt says which).
#   2. teachers 0-4 and students 0-4 (models shared by the next stage through $models).
#   3. iterative, sweep, slim (teacher seeds 0-4), distill (student seeds 0-4, teacher 0), prune (teacher seeds
#      0-4), longest first, then the extras (done on the dev VM already): PTQ/QAT of students 0-4, the int8 export.
#      Nothing starts after the budget (SEED002_BUDGET s from the start, default 400) and a job still running then
#      is stopped, so the phase ends inside 8 minutes; jobs.tsv lists rc and wall per job.
# Then merge.py joins the job files into merged.json and render_results.py --print shows the tables.
# Locally (lavapipe / CPU, tiny settings: the job list's dry run before a device request):
#   SG_LOCAL_BIN=build/bin SEED002_SCALE=0.01 SEED002_TEACHER=4,8,16 OUT=/tmp/p bash scripts/device/phase_seed002.sh
# Env: SEED002_PARALLEL (default 8: the lead runs this phase next to others), SEED002_BUDGET, SEED002_SCALE (epoch scale, default 1), SEED002_TEACHER
# (widths, default 64,128,256), SEED002_TEACHER_BACKEND / SEED002_STUDENT_BACKEND (skip the trial's choice).
set -uo pipefail
if [ -n "${SG_LOCAL_BIN:-}" ]; then
  export PATH=$(cd "$SG_LOCAL_BIN" && pwd):$PATH SG_SOURCE_DIR=$PWD
elif ! command -v bench_seed002 > /dev/null; then  # the lead's batch sources the prelude once for all phases
  . scripts/device/h200_prelude.sh
fi
export SEED002_MACHINE=${SEED002_MACHINE:-$([ -n "${SG_LOCAL_BIN:-}" ] && hostname || echo "H200 device machine")}
out=${OUT:-/tmp/out}/seed002
mkdir -p "$out"
start=$(date +%s)
deadline=$(( start + ${SEED002_BUDGET:-400} ))
parallel=${SEED002_PARALLEL:-8}  # the lead's batch: at most 8 processes, next to other phases
scale=${SEED002_SCALE:-1}
widths=${SEED002_TEACHER:-64,128,256}
models=${SEED002_MODELS:-/tmp/seed002_models}
rm -rf "$models" && mkdir -p "$models"
# one kernel cache for every job (atomic writes, entries checked on read): later jobs skip the SPIR-V compiles
export SG_KERNEL_CACHE=${SG_KERNEL_CACHE:-/tmp/seed002_kernel_cache}
run=scripts/seed002/run_jobs.sh
# a private copy of the binary: on 2026-12-01 7 of the 8 trial processes died at exec with SIGBUS (rc 135, 0.0 s)
# while the batch's other phases started, likely the staged binary being rewritten under them
mkdir -p "$models/bin" && cp "$(command -v bench_seed002)" "$models/bin/" && export SEED002_BIN=$models/bin/bench_seed002
common="--models $models --reuse --teacher $widths"
{ date -u +%FT%TZ; nproc; free -g | head -2; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
  vulkaninfo --summary 2>/dev/null | grep -iE 'deviceName|driverInfo' | head -4; } > "$out/machine.txt"
cat "$out/machine.txt"
mul() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%g", a * b }'; }

# 1. trial: the same short jobs on both backends at once (the contention of the real run, in small)
tb=${SEED002_TEACHER_BACKEND:-} sb=${SEED002_STUDENT_BACKEND:-}
if [ -z "$tb" ] || [ -z "$sb" ]; then
  mkdir -p "$out/trial"
  for b in vulkan cpu; do
    for s in 0 1 2; do
      echo "student_${b}_$s $b --table student --seed $s --epoch-scale $(mul "$scale" 0.1) --models $models/trial_$b --teacher $widths"
    done
    echo "teacher_${b} $b --table teacher --seed 0 --epoch-scale $(mul "$scale" 0.05) --models $models/trial_$b --teacher $widths"
  done > "$out/trial/jobs.txt"
  bash $run "$out/trial/jobs.txt" "$out/trial" 8 $(( $(date +%s) + 75 ))
  mean_wall() { awk -F'\t' -v p="$1" '$1 ~ p && $3 == "0" { t += $4; n++ } END { if (n) printf "%.1f", t / n; else print "inf" }' "$out/trial/jobs.tsv"; }
  sv=$(mean_wall '^student_vulkan') sc=$(mean_wall '^student_cpu') tv=$(mean_wall '^teacher_vulkan') tc=$(mean_wall '^teacher_cpu')
  faster() { awk -v v="$1" -v c="$2" 'BEGIN { print (c != "inf" && (v == "inf" || c + 0 < v + 0)) ? "cpu" : "vulkan" }'; }
  sb=${sb:-$(faster "$sv" "$sc")} tb=${tb:-$(faster "$tv" "$tc")}
  echo "trial (mean wall per job, 3 students + 1 teacher per backend, 8 processes at once): student 15 epochs vulkan $sv s, cpu $sc s;" \
       "teacher 2 epochs vulkan $tv s, cpu $tc s -> student-size jobs on $sb, teacher-size jobs on $tb" | tee "$out/trial.txt"
fi

# 2. the models the tables start from
for s in 0 1 2 3 4; do echo "teacher_s$s $tb --table teacher --seed $s --epoch-scale $scale $common"; done > "$out/jobs_models.txt"
for s in 0 1 2 3 4; do echo "student_s$s $sb --table student --seed $s --epoch-scale $scale $common"; done >> "$out/jobs_models.txt"
bash $run "$out/jobs_models.txt" "$out" "$parallel" "$deadline"
echo "models done at +$(( $(date +%s) - start )) s"

# 3. the tables, longest jobs first
{
  for s in 0 1 2 3 4; do echo "iterative_s$s $tb --table iterative --seed $s"; done
  for s in 0 1 2 3 4; do echo "sweep_s${s}_low $tb --table sweep --seed $s --rows 0.5,0.7,0.8,0.9"; done
  for s in 0 1 2 3 4; do echo "sweep_s${s}_high $tb --table sweep --seed $s --rows 0.95,0.98,0.99"; done
  for s in 0 1 2 3 4; do for r in 0.25 0.5 0.75; do echo "slim_s${s}_$r $tb --table slim --seed $s --rows $r"; done; done
  for s in 3 4 0 1 2; do for r in plain unlabeled; do echo "distill_s${s}_$r $sb --table distill --seed $s --rows $r"; done; done
  for s in 0 1 2 3 4; do echo "prune_s$s $tb --table prune --seed $s"; done
  # the same record in a second process: merge.py reports a conflict if a seed's result is not deterministic
  echo "again_sweep_s0_high $tb --table sweep --seed 0 --rows 0.95,0.98,0.99"
  # extras (done on the dev VM already): the PTQ/QAT table and the int8 export on this machine too
  echo "quant_int8_s0 $sb --table quant,int8 --seed 0"
  for s in 1 2 3 4; do echo "quant_s$s $sb --table quant --seed $s"; done
} | sed "s|\$| --epoch-scale $scale $common|" > "$out/jobs_tables.txt"
bash $run "$out/jobs_tables.txt" "$out" "$parallel" "$deadline"
echo "tables done at +$(( $(date +%s) - start )) s"

awk -F'\t' 'NR > 1 && $3 != "0" { bad++ } END { printf "%d of %d jobs not rc 0\n", bad, NR - 1 }' "$out/jobs.tsv"
awk -F'\t' 'NR > 1 && $3 != "0"' "$out/jobs.tsv" | head -20
for f in "$out"/logs/*.log; do grep -l 'bench_seed002:' "$f" >/dev/null && { echo "== $f"; tail -3 "$f"; }; done 2>/dev/null | head -40
if command -v python3 >/dev/null; then
  python3 scripts/seed002/merge.py "$out"/*.json --out "$out/merged.json" 2>&1 | tail -5
  python3 scripts/seed002/render_results.py "$out/merged.json" --print 2>&1 | head -150
fi
echo "phase_seed002 wall $(( $(date +%s) - start )) s"
