#!/usr/bin/env bash
# ctest seed002_merge: bench_seed002 split into one-table / one-seed / some-rows jobs (scripts/seed002/run_jobs.sh, two
# at a time, models shared through --models) and merged (scripts/seed002/merge.py) gives the same records and the same
# rendered tables as one run of the same tables and seeds, on a tiny CPU setting (teacher 4-8-16, epochs x 0.01);
# a resumed run adds nothing; a changed result is a merge conflict (--strict exits 1).
#   bash scripts/seed002/test_merge.sh build/bin/bench_seed002
set -euo pipefail
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
t=$(mktemp -d /tmp/sg_seed002_merge.XXXXXX)
trap 'rm -rf "$t"' EXIT
tiny="--split seed002 --epoch-scale 0.01 --teacher 4,8,16"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$bin" --backend cpu $tiny --seeds 2 --models "$t/m1" --tmp "$t/t1" --out "$t/single.json" > "$t/single.log" 2>&1 ||
  { cat "$t/single.log"; fail "the single run"; }
n_single=$($py -c "import json,sys; print(len(json.load(open(sys.argv[1]))['records']))" "$t/single.json")
[ "$n_single" = 35 ] || fail "the single run wrote $n_single records, expected 35 (2 seeds x 17 + int8)"
cp "$t/single.json" "$t/before_resume.json"
"$bin" --backend cpu $tiny --seeds 2 --models "$t/m1" --tmp "$t/t1" --out "$t/single.json" > "$t/resume.log" 2>&1
grep -q 'in .* already' "$t/resume.log" || fail "the resumed run did not skip the records it found"
cmp -s "$t/single.json" "$t/before_resume.json" || fail "a resumed run of a finished file changed it"

# the split run: models first, then the tables as jobs of one seed (some of one row), in a shuffled order
m="--models $t/m2 --reuse --tmp-dir-placeholder"
cat > "$t/models.txt" <<EOF
teacher_s1 cpu --table teacher --seed 1 $m
teacher_s0 cpu --table teacher --seed 0 $m
student_s0 cpu --table student --seed 0 $m
student_s1 cpu --table student --seed 1 $m
EOF
cat > "$t/tables.txt" <<EOF
sweep_s1 cpu --table sweep --seed 1 $m
sweep_s0_a cpu --table sweep --seed 0 --rows 0.9,0.5 $m
sweep_s0_b cpu --table sweep --seed 0 --rows 0.7,0.8,0.95,0.98,0.99 $m
distill_s1 cpu --table distill --seed 1 $m
distill_s0_u cpu --table distill --seed 0 --rows unlabeled $m
distill_s0_p cpu --table distill --seed 0 --rows plain $m
slim_s0_a cpu --table slim --seed 0 --rows 0.75 $m
slim_s0_b cpu --table slim --seed 0 --rows 0.25,0.5 $m
slim_s1 cpu --table slim --seed 1 $m
iterative_s1 cpu --table iterative --seed 1 $m
prune_iterative_s0 cpu --table prune,iterative --seed 0 $m
prune_s1 cpu --table prune --seed 1 $m
quant_s1 cpu --table quant --seed 1 $m
quant_int8_s0 cpu --table quant,int8 --seed 0 $m
EOF
for f in models tables; do  # every job its own scratch directory
  awk -v t="$t" '{ sub(/--tmp-dir-placeholder/, "--tmp " t "/tmp_" $1); print }' "$t/$f.txt" > "$t/$f.jobs"
done
export SEED002_BIN=$bin SEED002_ARGS=$tiny
bash "$here/run_jobs.sh" "$t/models.jobs" "$t/split" 2
bash "$here/run_jobs.sh" "$t/tables.jobs" "$t/split" 2
bad=$(awk -F'\t' 'NR > 1 && $3 != "0"' "$t/split/jobs.tsv")
[ -z "$bad" ] || { echo "$bad"; tail -5 "$t"/split/logs/*.log; fail "split jobs failed"; }

$py "$here/merge.py" "$t/single.json" --out "$t/a.json" --strict > /dev/null
$py "$here/merge.py" "$t"/split/*.json --out "$t/b.json" --strict > /dev/null || fail "the split jobs' merge has conflicts"
$py - "$t/a.json" "$t/b.json" <<'EOF' || fail "records differ"
import json, sys
drop = ("wall_seconds", "date", "command", "host", "source")
a, b = ([{k: v for k, v in r.items() if k not in drop} for r in json.load(open(p))["records"]] for p in sys.argv[1:3])
if len(a) != len(b):
    sys.exit(f"{len(a)} records in the single run, {len(b)} in the merge")
for x, y in zip(a, b):
    if x != y:
        sys.exit(f"single run {json.dumps(x)[:400]}\nmerged     {json.dumps(y)[:400]}")
EOF
$py "$here/render_results.py" "$t/a.json" --print --no-provenance > "$t/a.md"
$py "$here/render_results.py" "$t/b.json" --print --no-provenance > "$t/b.md"
diff "$t/a.md" "$t/b.md" || fail "the rendered tables differ"
grep -q '^| 0.95 | 0.5220 | 0.9598 | 0.9777 | .* | 2 (0,1) |' "$t/a.md" || fail "the sweep table lacks the 0.95 row of seeds 0 and 1"

# a changed result is a conflict
$py - "$t/split" <<'EOF'
import json, pathlib, sys
p = pathlib.Path(sys.argv[1]) / "prune_s1.json"
d = json.loads(p.read_text())
d["records"][0]["result"]["original"]["accuracy"] += 0.01
(pathlib.Path(sys.argv[1]) / "changed.json").write_text(json.dumps(d))
EOF
if $py "$here/merge.py" "$t/split/prune_s1.json" "$t/split/changed.json" --out "$t/c.json" --strict 2> "$t/c.err"; then
  fail "merge --strict accepted two different results of one record"
fi
grep -q conflict "$t/c.err" || fail "merge did not name the conflict"
echo "seed002 merge: $n_single records, single run == merged split jobs"
