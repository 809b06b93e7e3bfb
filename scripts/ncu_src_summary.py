"""Summarise Nsight Compute's per-instruction samples of one kernel (the SASS page that
`bash scripts/gpu_check.sh ncu-src` writes as ncu-src-N-sass.csv): where the warps were
when sampled, as the busiest instructions and as contiguous regions of the code.

    python scripts/ncu_src_summary.py ncu-src-0-sass.csv [--top 25] [--region 250]

Regions are fixed runs of instructions in address order (--region of them); a kernel's K
loop, epilogue and producer usually fall in different regions, so the table shows which
part of the code the samples (stalls included) land in. A busy branch is usually the back
edge of a wait loop: the instructions before it (--context of them) show what it waits on
(an mbarrier try-wait, a global load of a flag).
"""
import argparse
import csv
import sys


def load(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    # The first row names the kernel, the second holds the column names.
    kernel = rows[0][1] if rows and len(rows[0]) > 1 else "?"
    header = rows[1]
    data = [r for r in rows[2:] if len(r) == len(header)]
    return kernel, header, data


def as_int(v):
    try:
        return int(float(v.replace(",", "")))
    except ValueError:
        return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=25, help="busiest instructions to list")
    ap.add_argument("--region", type=int, default=250, help="instructions per region")
    ap.add_argument("--context", type=int, default=3,
                    help="instructions shown before each busy branch")
    args = ap.parse_args(argv)
    kernel, header, data = load(args.csv)
    src = header.index("Source")
    samples = header.index("Warp Stall Sampling (All Samples)")
    executed = header.index("Instructions Executed")
    total = sum(as_int(r[samples]) for r in data) or 1
    print(f"{kernel}")
    print(f"{len(data)} instructions, {total} samples, "
          f"{sum(as_int(r[executed]) for r in data)} warp instructions executed")
    print(f"\nbusiest {args.top} instructions (index: samples, share, SASS)")
    ranked = sorted(range(len(data)), key=lambda i: -as_int(data[i][samples]))
    for i in ranked[:args.top]:
        s = as_int(data[i][samples])
        print(f"  {i:6d}: {s:8d} {100.0 * s / total:5.1f}%  {data[i][src].strip()[:80]}")
        if "BRA" in data[i][src] and 100 * s >= total:
            for j in range(max(0, i - args.context), i):
                print(f"  {j:6d}:                 {data[j][src].strip()[:80]}")
    print(f"\nregions of {args.region} instructions with at least 1% of the samples")
    for a in range(0, len(data), args.region):
        part = data[a:a + args.region]
        s = sum(as_int(r[samples]) for r in part)
        if s * 100 >= total:
            e = sum(as_int(r[executed]) for r in part)
            print(f"  {a:6d}-{a + len(part) - 1:6d}: {100.0 * s / total:5.1f}% of samples, "
                  f"{e} warp instructions executed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
