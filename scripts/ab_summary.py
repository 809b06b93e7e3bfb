"""Summarises scripts/env_ab.py's output (its log, or the table it printed): for each
setting against the first and each dtype, the geomean speedup over the cases (each case's
best time of its rounds, so that one disturbed round does not decide), how many cases ran
faster or slower than a threshold, the extremes, and the cases that lost.

    python3 scripts/ab_summary.py even-ab-fuzz.log [--threshold 0.03]

A speedup above 1 means the setting ran faster than the first one (the base).
"""
import argparse
import math
import re
import sys


def parse(text):
    """The table: {'names': [setting, ...], 'rows': [(case, dtype, {setting: [ms, ...]})]}."""
    lines = text.splitlines()
    head = next((i for i, ln in enumerate(lines) if ln.startswith("case dtype ")), None)
    if head is None:
        raise ValueError("no 'case dtype ...' header: not env_ab.py output")
    cols = lines[head].split()[2:]
    names = []
    for c in cols:
        m = re.fullmatch(r"(.+)\[(\d+)\]", c)
        if not m:
            raise ValueError(f"column {c!r} is not NAME[ROUND]")
        if m.group(1) not in names:
            names.append(m.group(1))
    rows = []
    for ln in lines[head + 1:]:
        parts = ln.split()
        if not parts or parts[0] == "geomean" or len(parts) != 2 + len(cols):
            continue
        times = {n: [] for n in names}
        for c, v in zip(cols, parts[2:]):
            t = float(v)
            if not math.isnan(t):
                times[c.rsplit("[", 1)[0]].append(t)
        rows.append((parts[0], parts[1], times))
    return {"names": names, "rows": rows}


def summarise(table, threshold=0.03):
    """Per (setting, dtype): geomean speedup of the setting's best time against the base's,
    counts faster / slower than 1 +- threshold, the extremes and the slower cases."""
    base, others = table["names"][0], table["names"][1:]
    out = []
    dtypes = []
    for _, dt, _ in table["rows"]:
        if dt not in dtypes:
            dtypes.append(dt)
    for name in others:
        for dt in dtypes:
            ratios = []
            for case, d, times in table["rows"]:
                if d != dt or not times[base] or not times[name]:
                    continue
                ratios.append((case, min(times[base]) / min(times[name])))
            if not ratios:
                continue
            g = math.exp(sum(math.log(r) for _, r in ratios) / len(ratios))
            out.append({
                "setting": name, "dtype": dt, "cases": len(ratios), "geomean": g,
                "faster": sum(r > 1 + threshold for _, r in ratios),
                "slower": sum(r < 1 - threshold for _, r in ratios),
                "min": min(ratios, key=lambda x: x[1]), "max": max(ratios, key=lambda x: x[1]),
                "losers": [(c, r) for c, r in ratios if r < 1 - threshold],
            })
    return base, out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", help="env_ab.py's output ('-': standard input)")
    ap.add_argument("--threshold", type=float, default=0.03,
                    help="a case counts as faster / slower beyond 1 +- this (default 0.03)")
    args = ap.parse_args(argv)
    text = sys.stdin.read() if args.log == "-" else open(args.log, encoding="utf-8").read()
    try:
        base, rows = summarise(parse(text), args.threshold)
    except ValueError as e:
        sys.exit(f"ab_summary.py: {e}")
    pct = round(100 * args.threshold)
    for r in rows:
        print(f"{r['setting']} against {base}, {r['dtype']}: {r['geomean']:.3f}x geomean over "
              f"{r['cases']} cases (best of rounds); {r['faster']} faster and {r['slower']} "
              f"slower by more than {pct}%; from {r['min'][1]:.2f}x ({r['min'][0]}) to "
              f"{r['max'][1]:.2f}x ({r['max'][0]})")
        if r["losers"]:
            print("  slower: " + ", ".join(f"{c} {x:.2f}x" for c, x in r["losers"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
