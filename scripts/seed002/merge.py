#!/usr/bin/python3
"""Joins bench_seed002 JSON files into one list of records, the input of render_results.py.

  /usr/bin/python3 scripts/seed002/merge.py A.json B.json ... --out merged.json [--strict]

A record is one (table, seed, row) result of one machine (backend + device). The inputs are bench_seed002's files
(format seed002/2: a "records" list, one file per job of a split run, or one file of a whole run), earlier merged
files, and the older single-run format (bench/results/seed002_*.json of 2026-12-01: one teacher, per-seed lists),
which is converted to records here. The same (table, seed, row, backend, device) in two inputs is kept once; when the
two results differ (a run that is not deterministic per seed, or two builds) the first is kept and the conflict is
printed (--strict: exit 1). Records come out sorted by table, seed, row and machine, so the merge of the jobs of a
split run equals the single run of the same jobs up to the provenance fields (wall_seconds, date, command, host).
"""
import argparse
import json
import pathlib
import sys

TABLES = ["teacher", "prune", "iterative", "sweep", "slim", "student", "distill", "quant", "int8"]
PROVENANCE = ("wall_seconds", "date", "command", "host", "source")


def row_name(amount):
    """The row key bench_seed002 writes for a sweep/slim amount: 0.5 -> "0.5", 0.25 -> "0.25"."""
    return f"{float(amount):g}"


def from_legacy(doc, source, date):
    """Records of a file of the older format (one teacher: seed 0; per-seed lists for students)."""
    base = {"backend": doc.get("backend"), "device": doc.get("device"), "split": doc.get("split", "seed002"),
            "host": "development VM", "machine": "dev VM", "date": date, "source": source, "epoch_scale": 1,
            "command": "bench_seed002 --backend vulkan --seeds 5 (older single-run format)"}
    out = []

    def rec(table, seed, row, result):
        out.append({"table": table, "seed": seed, "row": row, "result": result, **base})

    if "teacher" in doc:
        rec("teacher", 0, "", doc["teacher"])
    p = doc.get("prune")
    if p and "original" in p:
        rec("prune", 0, "", {k: p[k] for k in ("original", "pruned", "finetuned", "removed") if k in p})
    if p and "iterative" in p:
        rec("iterative", 0, "", p["iterative"])
    for r in doc.get("sweep", []):
        rec("sweep", 0, row_name(r["amount"]), r)
    for r in doc.get("slim", []):
        rec("slim", 0, row_name(r["amount"]), r)
    s = doc.get("student")
    if s:
        for i, a in enumerate(s["accuracy"]):
            res = {"parameters": s["parameters"], "accuracy": a}
            if i == 0:
                res["size"] = s["size"]
            rec("student", i, "", res)
    d = doc.get("distill")
    if d:
        for key, row in (("distilled", "plain"), ("distilled_unlabeled", "unlabeled")):
            for i, a in enumerate(d.get(key, [])):
                rec("distill", i, row, {"teacher_seed": 0, "temperature": d.get("temperature", 4.0),
                                        "alpha": d.get("alpha", 0.9), "accuracy": a})
    q = doc.get("quant")
    if q:
        for i in range(len(q["float"])):
            rec("quant", i, "", {"float": q["float"][i], "float_retrain": q["float_retrain"][i],
                                 "bits": [{"bits": b["bits"], "ptq": b["ptq"][i], "qat": b["qat"][i]} for b in q["bits"]]})
    if "int8" in doc:
        rec("int8", 0, "", doc["int8"])
    return out


def records_of(path):
    doc = json.loads(pathlib.Path(path).read_text())
    if "records" in doc:
        return [{"source": str(path), **r} for r in doc["records"]] if doc.get("format") != "seed002/merged" \
            else doc["records"]
    date = pathlib.Path(path).stat().st_mtime
    import datetime
    day = datetime.datetime.fromtimestamp(date, datetime.timezone.utc).strftime("%Y-%m-%d")
    return from_legacy(doc, str(path), day)


def key(r):
    return (r["table"], r["seed"], r["row"], r.get("backend"), r.get("device"))


def sort_key(r):
    return (TABLES.index(r["table"]), r["seed"], r["row"], str(r.get("backend")), str(r.get("device")))


def merge(paths):
    """(records, conflicts): the records of every file, each key once, sorted."""
    seen, conflicts = {}, []
    for p in paths:
        for r in records_of(p):
            k = key(r)
            if k in seen:
                if seen[k]["result"] != r["result"]:
                    conflicts.append(f"{k}: {seen[k].get('source')} and {r.get('source')} differ")
                continue
            seen[k] = r
    return sorted(seen.values(), key=sort_key), conflicts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--out", required=True)
    ap.add_argument("--strict", action="store_true", help="exit 1 on a conflict")
    a = ap.parse_args()
    inputs = [p for p in a.inputs if pathlib.Path(p).resolve() != pathlib.Path(a.out).resolve()]
    records, conflicts = merge(inputs)
    pathlib.Path(a.out).write_text(json.dumps({"format": "seed002/merged", "sources": inputs, "records": records},
                                              indent=1) + "\n")
    for c in conflicts:
        print("conflict:", c, file=sys.stderr)
    print(f"{len(records)} records from {len(inputs)} files -> {a.out}; {len(conflicts)} conflicts")
    return 1 if conflicts and a.strict else 0


if __name__ == "__main__":
    sys.exit(main())
