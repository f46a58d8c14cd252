#!/usr/bin/python3
"""Renders bench_seed002's JSON (one file or several, merged) as the seed-002 section of docs/RESULTS.md, next to
the figures printed in seed 002 (the PyTorch compression study), between the markers
<!-- seed002:begin --> and <!-- seed002:end --> (appended when absent).

  /usr/bin/python3 scripts/seed002/render_results.py OUT.json [MORE.json ...] [--torch NAME=FILE ...] [--print]

--torch NAME=FILE adds a seed002_torch.py result (the peer baseline on a split) to the split-gap table;
--split NAME=FILE a bench_seed002 --split NAME --parts student result for shadergrad's column there.
"""
import json
import pathlib
import statistics
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
BEGIN, END = "<!-- seed002:begin -->", "<!-- seed002:end -->"

SEED = {
    "teacher": (208394, 0.9724), "student": (3658, 0.9541, 0.0064),
    "prune": [("original", 0.9724, 0, 817.1, 756.6), ("global 90 %", 0.7980, 187142, 1630.3, 779.6),
              ("fine-tuned 10 epochs", 0.9749, 187142, 1630.3, 780.8), ("prune.remove", 0.9749, 187142, 817.1, 143.1)],
    "layers": [0.149, 0.829, 0.945, 0.807],
    "sweep": {0.5: (0.9711, 0.9674, 0.5409), 0.7: (0.9649, 0.9737, 0.7569), 0.8: (0.9611, 0.9711, 0.8590),
              0.9: (0.7980, 0.9749, 0.9451), 0.95: (0.5220, 0.9598, 0.9777), 0.98: (0.1041, 0.7403, 0.9942),
              0.99: (0.1054, 0.1368, 0.9983)},
    "slim": {0.25: ((48, 96, 192), 117898, 5.7e-6, 0.9737, 0.9774, 0.9737, 463.6),
             0.5: ((32, 64, 128), 53002, 3.8e-6, 0.9711, 0.9649, 0.9749, 210.1),
             0.75: ((16, 32, 64), 13706, 9.5e-7, 0.7566, 0.9486, 0.9636, 56.6)},
    "distill": [("alone", 0.9541, 0.0064), ("distilled", 0.9573, 0.0043), ("distilled + 400 unlabeled", 0.9619, 0.0068)],
    "quant_float": (0.9541, 0.9553),
    "bits": {8: (0.9536, 0.944, 0.9541, 0.946), 6: (0.9561, 0.946, 0.9546, 0.947), 5: (0.9458, 0.935, 0.9533, 0.946),
             4: (0.9199, 0.911, 0.9430, 0.927), 3: (0.7338, 0.632, 0.9074, 0.897), 2: (0.1794, 0.092, 0.3408, 0.094)},
    "int8": (0.9598, 17.4, 0.9586, 12.8),
}


def ms(v):
    if not v:
        return "—"
    sd = statistics.stdev(v) if len(v) > 1 else 0.0
    return f"{statistics.mean(v):.4f} ± {sd:.4f}"


def kb(n):
    return f"{n / 1024:.1f}"


def render(r, torch_runs, split_runs):
    L = []
    seeds = r.get("seeds", "?")
    L.append(f"Backend `{r.get('backend')}` [{r.get('device')}], split `seed002` (seed 002's torch.randperm split, "
             f"600 train / 400 pool / 797 test), {seeds} seeds where the seed used 5; one test image is 0.0013. "
             "Command: `nice -n 10 build/bin/bench_seed002 --backend B --seeds N --out FILE` then "
             "`/usr/bin/python3 scripts/seed002/render_results.py FILE`. Wall time per part (s): " +
             ", ".join(f"{k} {v:.0f}" for k, v in r.get("wall_seconds", {}).items()) + ".")
    L.append("")
    L.append("### Baselines\n")
    L.append("| model | parameters | seed 002 | shadergrad |")
    L.append("|---|---|---|---|")
    if "teacher" in r:
        t = r["teacher"]
        L.append(f"| teacher make_cnn(64, 128, 256), 40 epochs | {t['parameters']:,} | {SEED['teacher'][1]:.4f} | "
                 f"{t['accuracy']:.4f} |")
    if "student" in r:
        s = r["student"]
        L.append(f"| student make_cnn(8, 16, 32), 150 epochs | {s['parameters']:,} | 0.9541 ± 0.0064 | "
                 f"{ms(s['accuracy'])} {[round(a, 3) for a in s['accuracy']]} |")
    if torch_runs:
        L.append("\nThe student baseline on two splits, PyTorch (seed 002's own code, `scripts/seed002/seed002_torch.py`) "
                 "and shadergrad:\n")
        L.append("| split | PyTorch (Debian torch) | shadergrad |")
        L.append("|---|---|---|")
        for name, t in torch_runs.items():
            ours = ms(r["student"]["accuracy"]) if name == "seed002" and "student" in r else ""
            if name in split_runs:
                v = split_runs[name]["student"]["accuracy"]
                ours = f"{ms(v)} {[round(x, 3) for x in v]}"
            L.append(f"| {name} | {t['mean']:.4f} ± {t['sd']:.4f} {[round(a, 3) for a in t['accuracy']]} | {ours} |")
    if "prune" in r:
        p = r["prune"]
        L.append("\n### Global L1 pruning of the teacher, 90 %, 10 fine-tune epochs (lr 1e-3)\n")
        L.append("| state | seed: accuracy | zeros | file KB | gzip KB | shadergrad: accuracy | zeros | file KB | gzip KB |")
        L.append("|---|---|---|---|---|---|---|---|---|")
        for (name, acc, z, raw, gz), key in zip(SEED["prune"], ["original", "pruned", "finetuned", "removed"]):
            q = p[key]
            L.append(f"| {name} | {acc:.4f} | {z:,} | {raw} | {gz} | {q['accuracy']:.4f} | {q['zeros']:,} | "
                     f"{kb(q['size']['raw'])} | {kb(q['size']['gzip'])} |")
        L.append("\nPer-layer sparsity after global 90 %:\n")
        L.append("| layer | shape | seed 002 | shadergrad |")
        L.append("|---|---|---|---|")
        for lay, sv in zip(p["pruned"]["layers"], SEED["layers"]):
            L.append(f"| {lay['name']} | {tuple(lay['shape'])} | {sv:.3f} | {lay['sparsity']:.3f} |")
        it = p.get("iterative")
        if it:
            L.append(f"\nIterative (shadergrad only): {it['rounds']} rounds of global pruning to 90 % overall, 10 "
                     f"fine-tune epochs each: test accuracy {it['accuracy']:.4f}, layer sparsities "
                     + ", ".join(f"{l['sparsity']:.3f}" for l in it["layers"]) + ".")
    if "sweep" in r:
        L.append("\n### Sparsity sweep (global L1, 10 fine-tune epochs)\n")
        L.append("| sparsity | seed: pruned | fine-tuned | emptiest layer | shadergrad: pruned | fine-tuned | emptiest layer |")
        L.append("|---|---|---|---|---|---|---|")
        for row in r["sweep"]:
            s = SEED["sweep"][row["amount"]]
            L.append(f"| {row['amount']:.2f} | {s[0]:.4f} | {s[1]:.4f} | {s[2]:.4f} | {row['before']:.4f} | "
                     f"{row['after']:.4f} | {row['emptiest']:.4f} |")
    if "slim" in r:
        L.append("\n### Structured channel pruning (L1 of output channels of layers 0, 3, 7; 10 fine-tune epochs; "
                 "the same shape from scratch 40 epochs)\n")
        L.append("| pruned | shape | parameters | max \\|masked − small\\| seed / ours | pruned seed / ours | fine-tuned seed / ours | "
                 "from scratch seed / ours | file KB seed / ours |")
        L.append("|---|---|---|---|---|---|---|---|")
        for row in r["slim"]:
            s = SEED["slim"][row["amount"]]
            L.append(f"| {row['amount']:.0%} | {tuple(row['shape'])} | {row['parameters']:,} | {s[2]:.1e} / "
                     f"{row['max_diff']:.1e} | {s[3]:.4f} / {row['pruned']:.4f} | {s[4]:.4f} / {row['finetuned']:.4f} | "
                     f"{s[5]:.4f} / {row['scratch']:.4f} | {s[6]} / {kb(row['size']['raw'])} |")
    if "distill" in r or "student" in r:
        L.append("\n### Distillation (teacher above, T = 4, α = 0.9; student make_cnn(8, 16, 32))\n")
        L.append("| student | seed 002 | shadergrad |")
        L.append("|---|---|---|")
        d = r.get("distill", {})
        ours = [r.get("student", {}).get("accuracy"), d.get("distilled"), d.get("distilled_unlabeled")]
        for (name, m, sd), v in zip(SEED["distill"], ours):
            L.append(f"| {name} | {m:.4f} ± {sd:.4f} | {ms(v)} {[round(a, 3) for a in v] if v else ''} |")
    if "quant" in r:
        q = r["quant"]
        L.append("\n### Post-training quantisation vs quantisation-aware training (30 epochs, lr 1e-3) of the students\n")
        L.append(f"Float students: seed {SEED['quant_float'][0]:.4f}, ours {ms(q['float'])}; float retrained 30 epochs: "
                 f"seed {SEED['quant_float'][1]:.4f}, ours {ms(q['float_retrain'])}.\n")
        L.append("| bits | seed: PTQ (min) | QAT (min) | shadergrad: PTQ (min) | QAT (min) |")
        L.append("|---|---|---|---|---|")
        for row in q["bits"]:
            s = SEED["bits"][row["bits"]]
            L.append(f"| {row['bits']} | {s[0]:.4f} ({s[1]:.3f}) | {s[2]:.4f} ({s[3]:.3f}) | {ms(row['ptq'])} "
                     f"({min(row['ptq']):.3f}) | {ms(row['qat'])} ({min(row['qat']):.3f}) |")
    if "int8" in r:
        i = r["int8"]
        f, fk, qa, qk = SEED["int8"]
        L.append("\n### int8 export (student seed 0; per-channel int8 weights, moving-average observers, QAT 30 epochs, "
                 "uint8 activations on the input and after every ReLU)\n")
        L.append("| | seed 002 (torch.ao convert, torch.save) | shadergrad (safetensors) |")
        L.append("|---|---|---|")
        L.append(f"| float model | {f:.4f}, {fk} KB | {i['float_accuracy']:.4f}, {kb(i['float_size']['raw'])} KB "
                 f"(gzip {kb(i['float_size']['gzip'])}) |")
        L.append(f"| int8 model | {qa:.4f}, {qk} KB | CPU integer inference {i['int8_cpu']:.4f}, "
                 f"{r.get('backend')} {i['int8_gpu']:.4f}, {kb(i['int8_size']['raw'])} KB "
                 f"(gzip {kb(i['int8_size']['gzip'])}) |")
        L.append(f"\n(fake-quantised before QAT {i['ptq_fake_quant']:.4f}, after {i['qat_fake_quant']:.4f}.)")
    return "\n".join(L) + "\n"


def main():
    args = sys.argv[1:]
    merged, torch_runs, split_runs, show = {}, {}, {}, False
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--torch":
            name, path = args[i + 1].split("=", 1)
            torch_runs[name] = json.loads(pathlib.Path(path).read_text())
            i += 2
            continue
        if a == "--split":
            name, path = args[i + 1].split("=", 1)
            split_runs[name] = json.loads(pathlib.Path(path).read_text())
            i += 2
            continue
        if a == "--print":
            show = True
        else:
            r = json.loads(pathlib.Path(a).read_text())
            walls = {**merged.get("wall_seconds", {}), **r.get("wall_seconds", {})}
            merged.update(r)
            merged["wall_seconds"] = walls
        i += 1
    text = render(merged, torch_runs, split_runs)
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
