"""Compare the convt side of two or more `convt bench --json` files, case by case.

    python scripts/bench_compare.py before.json after.json [more.json ...]

For every mode and case in the first file: convt's median ms in each file, the ratio of
the first to each later one (above 1: the later run is faster), and each file's geomean
speedup over PyTorch per mode. For A/B runs of one build (an environment switch, e.g.
CONVT_TMA_SMEM_KB or CONVT_TMA_MMA) taken in one session on one GPU.
"""
import json
import math
import sys


def load(path):
    d = json.load(open(path))
    rows = {(r["mode"], r["case"]): r for r in d["results"]}
    summary = {s["mode"]: s for s in d["summary"]}
    return d, rows, summary


def main(paths):
    runs = [load(p) for p in paths]
    first_doc, first_rows, _ = runs[0]
    gpu = first_doc.get("environment", {}).get("gpu_name")
    print(f"# convt ms per case ({gpu}); ratio = first / later (above 1: later is faster)")
    for i, p in enumerate(paths):
        print(f"#  [{i}] {p}: {runs[i][0].get('command', '')}")
    modes = list(dict.fromkeys(m for m, _ in first_rows))
    for mode in modes:
        print(f"\n## {mode}")
        header = ["case"] + [f"ms[{i}]" for i in range(len(runs))] + \
                 [f"[0]/[{i}]" for i in range(1, len(runs))]
        print(" ".join(f"{h:>10}" for h in header))
        logs = [[] for _ in runs[1:]]
        for (m, case), r0 in first_rows.items():
            if m != mode:
                continue
            ms = [run[1].get((m, case), {}).get("convt", {}).get("ms") for run in runs]
            cells = [case] + [f"{v:.3f}" if v else "-" for v in ms]
            for j, v in enumerate(ms[1:]):
                if ms[0] and v:
                    cells.append(f"{ms[0] / v:.2f}x")
                    logs[j].append(math.log(ms[0] / v))
                else:
                    cells.append("-")
            print(" ".join(f"{c:>10}" for c in cells))
        geo = [f"{math.exp(sum(l) / len(l)):.2f}x" if l else "-" for l in logs]
        speed = []
        for run in runs:
            s = run[2].get(mode, {}).get("geomean_speedup")
            speed.append(f"{s:.2f}x" if s else "-")
        print(f"geomean ratio: {' '.join(geo)}; geomean speedup over PyTorch: {' '.join(speed)}")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1:])
