"""Readers shared by the device phases' summaries (phase_fusedopt_summary.py, vk_phase_summary.py): the runs a
phase logged in OUT/runs.txt and the nvidia-smi samples it wrote to OUT/smi.csv. A missing file reads as empty."""
import datetime, os


def read_runs(out):
    """[(name, start s, end s, rc)] from OUT/runs.txt: one line per run, "NAME START END RC" (epoch seconds)."""
    path = os.path.join(out, "runs.txt")
    runs = []
    if os.path.exists(path):
        for line in open(path):
            name, s, e, rc = line.split()
            runs.append((name, float(s), float(e), rc))
    return runs


def read_smi(out):
    """[(epoch s, [the CSV fields after the timestamp])] from OUT/smi.csv (nvidia-smi --format=csv lines whose first
    field is "YYYY/MM/DD HH:MM:SS.fff"); the header and malformed lines are skipped."""
    path = os.path.join(out, "smi.csv")
    samples = []
    if os.path.exists(path):
        for line in open(path):
            f = [x.strip() for x in line.split(",")]
            try:
                samples.append((datetime.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f").timestamp(), f[1:]))
            except (ValueError, IndexError):
                pass
    return samples
