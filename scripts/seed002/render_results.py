#!/usr/bin/python3
"""Renders bench_seed002's records (merged with scripts/seed002/merge.py, or any bench_seed002 JSON files, merged
here the same way) as the seed-002 section of docs/RESULTS.md, next to the figures printed in seed 002 (the
PyTorch compression study), between the markers <!-- seed002:begin --> and <!-- seed002:end --> (appended when
absent).

  /usr/bin/python3 scripts/seed002/render_results.py MERGED.json [MORE.json ...] [--torch NAME=FILE ...]
      [--split NAME=FILE] [--torch-tables FILE] [--torch-distill FILE] [--print] [--no-provenance]

Every shadergrad figure is the mean ± sample SD (statistics.stdev, as seed 002) over the seeds one machine (backend +
device) produced, with the number of seeds; a table gets one row per machine. † marks a mean that differs from the
seed's figure by more than the spread: the seed's SD where it printed one (5 seeds), else our SD over the seeds.
--torch NAME=FILE adds a seed002_torch.py result (the peer baseline on a split) to the split-gap table; --split
NAME=FILE a bench_seed002 --split NAME student result for shadergrad's column there; --torch-tables FILE the output of
scripts/seed002/torch_tables.py (seed 002's own code over torch seeds) as a table of the peer's spread;
--torch-distill FILE scripts/seed002/distill_torch.py's result under the distillation table.
--no-provenance leaves out the provenance table (dates, commands, hosts, wall times): the rest depends only on
the results (scripts/seed002/test_merge.sh compares it between a single run and the merge of its split jobs).
"""
import json
import pathlib
import statistics
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import merge as merging  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
BEGIN, END = "<!-- seed002:begin -->", "<!-- seed002:end -->"

SEED = {
    "teacher": (208394, 0.9724), "student": (3658, 0.9541, 0.0064),
    "prune": [("original", 0.9724, 0, 817.1, 756.6), ("global 90 %", 0.7980, 187142, 1630.3, 779.6),
              ("fine-tuned 10 epochs", 0.9749, 187142, 1630.3, 780.8), ("prune.remove", 0.9749, 187142, 817.1, 143.1)],
    "layers": [0.149, 0.829, 0.945, 0.807],
    "sweep": {"0.5": (0.9711, 0.9674, 0.5409), "0.7": (0.9649, 0.9737, 0.7569), "0.8": (0.9611, 0.9711, 0.8590),
              "0.9": (0.7980, 0.9749, 0.9451), "0.95": (0.5220, 0.9598, 0.9777), "0.98": (0.1041, 0.7403, 0.9942),
              "0.99": (0.1054, 0.1368, 0.9983)},
    "slim": {"0.25": ((48, 96, 192), 117898, 5.7e-6, 0.9737, 0.9774, 0.9737, 463.6),
             "0.5": ((32, 64, 128), 53002, 3.8e-6, 0.9711, 0.9649, 0.9749, 210.1),
             "0.75": ((16, 32, 64), 13706, 9.5e-7, 0.7566, 0.9486, 0.9636, 56.6)},
    "distill": [("alone", 0.9541, 0.0064), ("distilled", 0.9573, 0.0043), ("distilled + 400 unlabeled", 0.9619, 0.0068)],
    "quant_float": (0.9541, 0.9553),
    "bits": {8: (0.9536, 0.944, 0.9541, 0.946), 6: (0.9561, 0.946, 0.9546, 0.947), 5: (0.9458, 0.935, 0.9533, 0.946),
             4: (0.9199, 0.911, 0.9430, 0.927), 3: (0.7338, 0.632, 0.9074, 0.897), 2: (0.1794, 0.092, 0.3408, 0.094)},
    "int8": (0.9598, 17.4, 0.9586, 12.8),
}


def sd(v):
    return statistics.stdev(v) if len(v) > 1 else 0.0


def ms(v, digits=4):
    if not v:
        return "—"
    return f"{statistics.mean(v):.{digits}f} ± {sd(v):.{digits}f}"


def flag(v, seed_value, seed_sd=None):
    """† when mean(v) differs from the seed's figure by more than the spread (seed's SD, else ours)."""
    if not v or (seed_sd is None and len(v) < 2):
        return ""
    spread = seed_sd if seed_sd is not None else sd(v)
    return " †" if abs(statistics.mean(v) - seed_value) > max(spread, 0.0013) else ""


def kb(n):
    return f"{n / 1024:.1f}"


def kbm(v):
    return kb(statistics.mean(v)) if v else "—"


def machine(r):
    return f"{r.get('machine', r.get('host', '?'))}, {r.get('backend')} [{r.get('device')}]"


def seeds_of(recs):
    return sorted({r["seed"] for r in recs})


class Records:
    def __init__(self, records):
        self.records = records

    def of(self, table, row=None):
        """{machine: [records sorted by seed]} of a table (and row), machines with most seeds first."""
        groups = {}
        for r in self.records:
            if r["table"] == table and (row is None or r["row"] == row):
                groups.setdefault(machine(r), []).append(r)
        for g in groups.values():
            g.sort(key=lambda r: r["seed"])
        return dict(sorted(groups.items(), key=lambda kv: (-len(seeds_of(kv[1])), kv[0])))

    def rows(self, table):
        out = []
        for r in self.records:
            if r["table"] == table and r["row"] not in out:
                out.append(r["row"])
        return sorted(out, key=lambda x: float(x) if x.replace(".", "").isdigit() else x)


def vals(recs, *path):
    out = []
    for r in recs:
        x = r["result"]
        for p in path:
            x = x[p]
        out.append(x)
    return out


def seeds_label(recs):
    s = seeds_of(recs)
    return f"{len(s)} ({','.join(map(str, s))})" if s else "0"


def per_seed(v):
    return "[" + ", ".join(f"{a:.3f}" for a in v) + "]"


def baselines(R, torch_runs, split_runs, L):
    L.append("### Baselines\n")
    L.append("| model | parameters | seed 002 | shadergrad | seeds | machine |")
    L.append("|---|---|---|---|---|---|")
    for m, recs in R.of("teacher").items():
        a = vals(recs, "accuracy")
        L.append(f"| teacher make_cnn(64, 128, 256), 40 epochs | {recs[0]['result']['parameters']:,} | "
                 f"{SEED['teacher'][1]:.4f} | {ms(a)}{flag(a, SEED['teacher'][1])} {per_seed(a)} | {seeds_label(recs)} | {m} |")
    for m, recs in R.of("student").items():
        a = vals(recs, "accuracy")
        L.append(f"| student make_cnn(8, 16, 32), 150 epochs | {recs[0]['result']['parameters']:,} | 0.9541 ± 0.0064 | "
                 f"{ms(a)}{flag(a, 0.9541, 0.0064)} {per_seed(a)} | {seeds_label(recs)} | {m} |")
    if torch_runs:
        L.append("\nThe student baseline on two splits, PyTorch (seed 002's own code, `scripts/seed002/seed002_torch.py`) "
                 "and shadergrad (dev VM):\n")
        L.append("| split | PyTorch (Debian torch) | shadergrad |")
        L.append("|---|---|---|")
        dev = [v for k, v in R.of("student").items() if k.startswith("dev VM")]
        for name, t in torch_runs.items():
            ours = ms(vals(dev[0], "accuracy")) if name == "seed002" and dev else ""
            if name in split_runs:
                v = split_runs[name]["student"]["accuracy"]
                ours = f"{ms(v)} {per_seed(v)}"
            L.append(f"| {name} | {t['mean']:.4f} ± {t['sd']:.4f} {per_seed(t['accuracy'])} | {ours} |")


def prune_table(R, L):
    groups = R.of("prune")
    if not groups:
        return
    L.append("\n### Global L1 pruning of the teacher, 90 %, 10 fine-tune epochs (lr 1e-3)\n")
    L.append("Teacher seed S pruned and fine-tuned with shuffling seed S; sizes are means over the seeds.\n")
    L.append("| state | seed: accuracy | zeros | file KB | gzip KB | shadergrad: accuracy | zeros | file KB | gzip KB | seeds | machine |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for (name, acc, z, raw, gz), k in zip(SEED["prune"], ["original", "pruned", "finetuned", "removed"]):
        for m, recs in groups.items():
            a = vals(recs, k, "accuracy")
            L.append(f"| {name} | {acc:.4f} | {z:,} | {raw} | {gz} | {ms(a)}{flag(a, acc)} | "
                     f"{round(statistics.mean(vals(recs, k, 'zeros'))):,} | {kbm(vals(recs, k, 'size', 'raw'))} | "
                     f"{kbm(vals(recs, k, 'size', 'gzip'))} | {seeds_label(recs)} | {m} |")
    L.append("\nPer-layer sparsity after global 90 % (mean over the seeds):\n")
    L.append("| layer | shape | seed 002 | " + " | ".join(groups) + " |")
    L.append("|---|---|---|" + "---|" * len(groups))
    first = next(iter(groups.values()))[0]["result"]["pruned"]["layers"]
    for i, (lay, sv) in enumerate(zip(first, SEED["layers"])):
        cells = [ms([r["result"]["pruned"]["layers"][i]["sparsity"] for r in recs], 3) for recs in groups.values()]
        L.append(f"| {lay['name']} | {tuple(lay['shape'])} | {sv:.3f} | " + " | ".join(cells) + " |")


def iterative_table(R, L):
    groups = R.of("iterative")
    if not groups:
        return
    L.append("\n### Iterative pruning (shadergrad only: seed 002 describes it, prints no figures)\n")
    L.append("4 rounds of global L1 pruning of 1 − 0.1^(1/4) = 43.8 % of the still-kept weights, each followed by 10 "
             "fine-tune epochs (lr 1e-3), to 90 % overall; compare the one-shot 90 % above (seed 002: 0.7980 → 0.9749).\n")
    L.append("| round | overall sparsity | accuracy after pruning | after fine-tuning | seeds | machine |")
    L.append("|---|---|---|---|---|---|")
    for m, recs in groups.items():
        for i in range(len(recs[0]["result"]["rounds"])):
            sp = [r["result"]["rounds"][i]["sparsity"] for r in recs]
            L.append(f"| {i + 1} | {statistics.mean(sp):.3f} | {ms([r['result']['rounds'][i]['pruned'] for r in recs])} | "
                     f"{ms([r['result']['rounds'][i]['finetuned'] for r in recs])} | {seeds_label(recs)} | {m} |")
    L.append("\n| | zeros | file KB masked (gzip) | after prune.remove KB (gzip) | layer sparsities | machine |")
    L.append("|---|---|---|---|---|---|")
    for m, recs in groups.items():
        layers = ", ".join(f"{statistics.mean(r['result']['layers'][i]['sparsity'] for r in recs):.3f}"
                           for i in range(len(recs[0]["result"]["layers"])))
        L.append(f"| iterative 90 % | {round(statistics.mean(vals(recs, 'zeros'))):,} | "
                 f"{kbm(vals(recs, 'size_masked', 'raw'))} ({kbm(vals(recs, 'size_masked', 'gzip'))}) | "
                 f"{kbm(vals(recs, 'size', 'raw'))} ({kbm(vals(recs, 'size', 'gzip'))}) | {layers} | {m} |")


def sweep_table(R, L):
    if not R.of("sweep"):
        return
    L.append("\n### Sparsity sweep (global L1 of teacher seed S, 10 fine-tune epochs with shuffling seed S)\n")
    L.append("| sparsity | seed: pruned | fine-tuned | emptiest layer | shadergrad: pruned | fine-tuned | emptiest layer | "
             "gzip KB after remove | seeds | machine |")
    L.append("|---|---|---|---|---|---|---|---|---|---|")
    for row in R.rows("sweep"):
        s = SEED["sweep"][row]
        for m, recs in R.of("sweep", row).items():
            b, a = vals(recs, "before"), vals(recs, "after")
            gz = [r["result"]["size"]["gzip"] for r in recs if "size" in r["result"]]
            L.append(f"| {float(row):.2f} | {s[0]:.4f} | {s[1]:.4f} | {s[2]:.4f} | {ms(b)}{flag(b, s[0])} | "
                     f"{ms(a)}{flag(a, s[1])} | {statistics.mean(vals(recs, 'emptiest')):.4f} | {kbm(gz)} | "
                     f"{seeds_label(recs)} | {m} |")


def slim_table(R, L):
    if not R.of("slim"):
        return
    L.append("\n### Structured channel pruning (L1 of output channels of layers 0, 3, 7 of teacher seed S; 10 fine-tune "
             "epochs; the same shape from scratch, 40 epochs, init and shuffling seed S)\n")
    L.append("| pruned | shape | parameters | max \\|masked − small\\| seed / ours (max) | pruned seed / ours | "
             "fine-tuned seed / ours | from scratch seed / ours | file KB seed / ours (gzip) | seeds | machine |")
    L.append("|---|---|---|---|---|---|---|---|---|---|")
    for row in R.rows("slim"):
        s = SEED["slim"][row]
        for m, recs in R.of("slim", row).items():
            p, f, sc = vals(recs, "pruned"), vals(recs, "finetuned"), vals(recs, "scratch")
            res = recs[0]["result"]
            L.append(f"| {float(row):.0%} | {tuple(res['shape'])} | {res['parameters']:,} | {s[2]:.1e} / "
                     f"{max(vals(recs, 'max_diff')):.1e} | {s[3]:.4f} / {ms(p)}{flag(p, s[3])} | "
                     f"{s[4]:.4f} / {ms(f)}{flag(f, s[4])} | {s[5]:.4f} / {ms(sc)}{flag(sc, s[5])} | "
                     f"{s[6]} / {kbm(vals(recs, 'size', 'raw'))} ({kbm(vals(recs, 'size', 'gzip'))}) | "
                     f"{seeds_label(recs)} | {m} |")


def distill_table(R, L, td=None):
    if not R.of("distill") and not R.of("student"):
        return
    L.append("\n### Distillation (teacher seed 0, T = 4, α = 0.9; student make_cnn(8, 16, 32), seeds 0–4)\n")
    L.append("| student | seed 002 | shadergrad | seeds | machine |")
    L.append("|---|---|---|---|---|")
    for (name, mean, s), (table, row) in zip(SEED["distill"], [("student", None), ("distill", "plain"), ("distill", "unlabeled")]):
        for m, recs in R.of(table, row).items():
            a = vals(recs, "accuracy")
            L.append(f"| {name} | {mean:.4f} ± {s:.4f} | {ms(a)}{flag(a, mean, s)} {per_seed(a)} | {seeds_label(recs)} | {m} |")
    if not td:
        return
    L.append(f"\nThe same experiment in PyTorch {td['torch']} (seed 002's own code, `scripts/seed002/distill_torch.py`, "
             "CPU, same split, student seeds 0–4) with different teachers:\n")
    L.append("| teacher | teacher accuracy | alone | distilled | distilled + 400 unlabeled |")
    L.append("|---|---|---|---|---|")
    names = {"torch_teacher": "seed 002's (torch.manual_seed(0), its code)",
             "shadergrad_teacher": "shadergrad's teacher seed 0 (dev VM) loaded into torch"}
    for k, r in td.items():
        if not isinstance(r, dict):
            continue
        name = names.get(k, f"torch teacher seed {k.rsplit('_', 1)[-1]}")
        L.append(f"| {name} | {r['teacher']:.4f} | {ms(r['alone'])} | {ms(r['distilled'])} | "
                 f"{ms(r['distilled_unlabeled'])} |")


def quant_table(R, L):
    for m, recs in R.of("quant").items():
        L.append("\n### Post-training quantisation vs quantisation-aware training (30 epochs, lr 1e-3) of the students\n")
        L.append(f"{m}, student seeds {seeds_label(recs)}. Float students: seed {SEED['quant_float'][0]:.4f}, ours "
                 f"{ms(vals(recs, 'float'))}; float retrained 30 epochs: seed {SEED['quant_float'][1]:.4f}, ours "
                 f"{ms(vals(recs, 'float_retrain'))}.\n")
        L.append("| bits | seed: PTQ (min) | QAT (min) | shadergrad: PTQ (min) | QAT (min) |")
        L.append("|---|---|---|---|---|")
        for i, b in enumerate(recs[0]["result"]["bits"]):
            s = SEED["bits"][b["bits"]]
            ptq = [r["result"]["bits"][i]["ptq"] for r in recs]
            qat = [r["result"]["bits"][i]["qat"] for r in recs]
            L.append(f"| {b['bits']} | {s[0]:.4f} ({s[1]:.3f}) | {s[2]:.4f} ({s[3]:.3f}) | {ms(ptq)}{flag(ptq, s[0])} "
                     f"({min(ptq):.3f}) | {ms(qat)}{flag(qat, s[2])} ({min(qat):.3f}) |")


def int8_table(R, L):
    for m, recs in R.of("int8").items():
        i = recs[0]["result"]
        f, fk, qa, qk = SEED["int8"]
        L.append("\n### int8 export (student seed 0; per-channel int8 weights, moving-average observers, QAT 30 epochs, "
                 f"uint8 activations on the input and after every ReLU; {m})\n")
        L.append("| | seed 002 (torch.ao convert, torch.save) | shadergrad (safetensors) |")
        L.append("|---|---|---|")
        L.append(f"| float model | {f:.4f}, {fk} KB | {i['float_accuracy']:.4f}, {kb(i['float_size']['raw'])} KB "
                 f"(gzip {kb(i['float_size']['gzip'])}) |")
        L.append(f"| int8 model | {qa:.4f}, {qk} KB | CPU integer inference {i['int8_cpu']:.4f}, "
                 f"{recs[0].get('backend')} {i['int8_gpu']:.4f}, {kb(i['int8_size']['raw'])} KB "
                 f"(gzip {kb(i['int8_size']['gzip'])}) |")
        L.append(f"\n(fake-quantised before QAT {i['ptq_fake_quant']:.4f}, after {i['qat_fake_quant']:.4f}.)")


def torch_rows(tt, L):
    """seed 002's own code over torch seeds (scripts/seed002/torch_tables.py), the peer's spread for the tables."""
    if not tt:
        return
    L.append(f"\n### Seed 002's own PyTorch code over torch seeds {tt['seeds']} (`scripts/seed002/torch_tables.py`, "
             f"torch {tt['torch']}, same split; the peer's spread for the tables above)\n")
    L.append("| table | row | seed 002 printed | PyTorch pruned / before | PyTorch fine-tuned / after | PyTorch from scratch |")
    L.append("|---|---|---|---|---|---|")
    L.append(f"| teacher | | {SEED['teacher'][1]:.4f} | {ms(tt['teacher'])} | | |")
    for row, d in tt.get("sweep", {}).items():
        s = SEED["sweep"][row]
        L.append(f"| sweep | {float(row):.2f} | {s[0]:.4f} / {s[1]:.4f} | {ms(d['before'])} | {ms(d['after'])} | |")
    for row, d in tt.get("slim", {}).items():
        s = SEED["slim"][row]
        L.append(f"| slim | {float(row):.0%} | {s[3]:.4f} / {s[4]:.4f} / {s[5]:.4f} | {ms(d['pruned'])} | "
                 f"{ms(d['finetuned'])} | {ms(d['scratch'])} |")
    for row, d in tt.get("iterative", {}).items():
        L.append(f"| iterative | round {row} | | {ms(d['pruned'])} | {ms(d['finetuned'])} | |")


def provenance(R, L):
    L.append("\n### Where each row came from\n")
    L.append("| machine | tables (seeds) | dates (UTC) | wall s (sum of records) | a command |")
    L.append("|---|---|---|---|---|")
    groups = {}
    for r in R.records:
        groups.setdefault(machine(r), []).append(r)
    for m, recs in groups.items():
        tabs = {}
        for r in recs:
            tabs.setdefault(r["table"], set()).add(r["seed"])
        t = ", ".join(f"{k} ({','.join(map(str, sorted(v)))})" for k, v in tabs.items())
        dates = sorted(str(r.get("date", "?")) for r in recs)
        wall = sum(r.get("wall_seconds", 0) or 0 for r in recs)
        cmd = next((r["command"] for r in recs if r.get("command")), "?").replace("|", "\\|")
        L.append(f"| {m} | {t} | {dates[0]} – {dates[-1]} | {wall:.0f} | `{cmd}` |")


def render(records, torch_runs=None, split_runs=None, torch_tables=None, with_provenance=True, torch_distill=None):
    R = Records(records)
    L = ["Split `seed002` (seed 002's torch.randperm split, 600 train / 400 pool / 797 test); one test image is "
         "0.0013. Seed S of a pruning table is teacher seed S (init and shuffling; seed 002 ran seed 0 only); of a "
         "student table, student seed S. Mean ± sample SD over the seeds of one machine; † = differs from the seed's "
         "figure by more than the spread (the seed's SD where it printed one, else ours). Commands: "
         "`bench_seed002 ... --out F` (or split jobs: `scripts/device/phase_seed002.sh`), "
         "`scripts/seed002/merge.py F... --out M`, `scripts/seed002/render_results.py M`.", ""]
    baselines(R, torch_runs or {}, split_runs or {}, L)
    prune_table(R, L)
    iterative_table(R, L)
    sweep_table(R, L)
    slim_table(R, L)
    distill_table(R, L, torch_distill)
    quant_table(R, L)
    int8_table(R, L)
    torch_rows(torch_tables, L)
    if with_provenance:
        provenance(R, L)
    return "\n".join(L) + "\n"


def main():
    args = sys.argv[1:]
    files, torch_runs, split_runs, torch_tables, torch_distill, show, prov = [], {}, {}, None, None, False, True
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("--torch", "--split"):
            name, path = args[i + 1].split("=", 1)
            (torch_runs if a == "--torch" else split_runs)[name] = json.loads(pathlib.Path(path).read_text())
            i += 2
            continue
        if a in ("--torch-tables", "--torch-distill"):
            t = json.loads(pathlib.Path(args[i + 1]).read_text())
            if a == "--torch-tables":
                torch_tables = t
            else:
                torch_distill = t
            i += 2
            continue
        if a == "--print":
            show = True
        elif a == "--no-provenance":
            prov = False
        else:
            files.append(a)
        i += 1
    records, conflicts = merging.merge(files)
    for c in conflicts:
        print("conflict:", c, file=sys.stderr)
    text = render(records, torch_runs, split_runs, torch_tables, prov, torch_distill)
    if show:
        print(text)
        return
    doc = ROOT / "docs" / "RESULTS.md"
    s = doc.read_text()
    block = f"{BEGIN}\n{text}{END}"
    if BEGIN in s:
        s = s[:s.index(BEGIN)] + block + s[s.index(END) + len(END):]
    else:
        s = s.rstrip("\n") + "\n\n## Seed 002's compression study (sg::compress, bench/bench_seed002.cpp)\n\n" + block + "\n"
    doc.write_text(s)
    print(f"updated {doc}")


if __name__ == "__main__":
    main()
