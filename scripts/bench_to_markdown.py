"""Render a `convt bench --json` file as the Markdown tables of docs/benchmarks.md.

    python scripts/bench_to_markdown.py bench.json > docs/benchmarks.md
"""
import json
import sys


def fmt(v, spec):
    return "—" if v is None else format(v, spec)


def main(path):
    d = json.load(open(path))
    env = d["environment"]
    print("# Benchmarks\n")
    print("Measured with `convt bench` (see docs/bench.md for the method: same tensors for both")
    print("sides, interleaved, CUDA events, L2 evicted before each timed call, median of the")
    print("runs; errors are max|out − oracle| / max|oracle| against a float64 oracle).\n")
    print(f"- GPU: {env['gpu_name']} ({env['gpu_sm_count']} SMs), driver {env['driver']}, "
          f"CUDA {env['cuda']}, torch {env['torch']}, cuDNN {env['cudnn']}")
    print(f"- date: {d['date']}; command: `{d['command']}`")
    print(f"- copy bandwidth {d['copy_bandwidth_gbps'] / 1000:.2f} TB/s (measured); "
          f"peaks (TFLOP/s): " + ", ".join(f"{k} {v}" for k, v in d["peaks_tflops"].items()))
    print()
    summary = {s["mode"]: s for s in d["summary"]}
    for mode in d["modes"]:
        name = mode if isinstance(mode, str) else mode.get("name", str(mode))
        rows = [r for r in d["results"] if r["mode"] == name]
        if not rows:
            continue
        print(f"## {name}\n")
        print("| case | PyTorch ms | convt ms | speedup | roofline ms | PyTorch % roof | "
              "convt % roof | PyTorch error | convt error | status |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            pt, cv = r["pytorch"], r["convt"]
            pct = lambda s: fmt(None if s.get("roofline_fraction") is None
                                else 100 * s["roofline_fraction"], ".1f")
            print(f"| {r['case']} | {fmt(pt.get('ms'), '.3f')} | {fmt(cv.get('ms'), '.3f')} | "
                  f"{fmt(r['speedup'], '.2f')}× | {fmt(r['roofline_ms'], '.3f')} | {pct(pt)}% | "
                  f"{pct(cv)}% | {fmt(pt.get('error'), '.1e')} | {fmt(cv.get('error'), '.1e')} | "
                  f"{r['status']} |")
        s = summary.get(name)
        if s:
            print(f"| **geomean** ({s['passed']}/{s['cases']} ok) | | | "
                  f"**{fmt(s['geomean_speedup'], '.2f')}×** | | "
                  f"{fmt(100 * s['geomean_roofline_fraction_pytorch'], '.1f')}% | "
                  f"{fmt(100 * s['geomean_roofline_fraction_convt'], '.1f')}% | | | |")
        print()
        kernels = [(r["case"], r["convt"].get("forward_kernel")) for r in rows]
        if any(k for _, k in kernels):
            print("<details><summary>forward kernel per case (describe_forward)</summary>\n")
            for case, k in kernels:
                print(f"- {case}: {k or '—'}")
            print("\n</details>\n")


if __name__ == "__main__":
    main(sys.argv[1])
