"""Where the forward dispatch leaves speed behind: reads scripts/env_ab.py's output for a
suite timed with the dispatch's choice first (the base) and then each kernel forced
(CONVT_FORWARD_KERNEL=...), and prints, per dtype, how much faster the fastest setting of
each layer would have been (the geomean over the suite of base time / best time: what a
dispatcher that always picked right would gain), the layers where a forced kernel beat
the base by more than a threshold with their arguments, and the same gain by kind of
layer (dimensions, strided or not, narrow groups or not), so that a rule can be sought
for a kind of layer rather than for single layers.

    python3 scripts/dispatch_audit.py dispatch-audit.log scripts/suites/dispatch_audit.json \\
        [--threshold 0.10]

A forced kernel that cannot express a layer runs the dispatch's choice, so it never shows
as a gain there.
"""
import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ab_summary import parse  # noqa: E402


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else 1.0


def describe(c):
    """A layer's arguments in one short line."""
    def tup(v):
        return "x".join(str(x) for x in v) if isinstance(v, list) else str(v)
    out = (f"{c['dims']}-D {c['in_channels']}->{c['out_channels']}"
           f"{' g' + str(c['groups']) if c.get('groups', 1) > 1 else ''} k{tup(c['kernel_size'])}")
    for key, tag in (("stride", "s"), ("dilation", "d"), ("padding", "p")):
        v = c.get(key, 1 if key != "padding" else 0)
        vals = v if isinstance(v, list) else [v]
        if any(x != (0 if key == "padding" else 1) for x in vals):
            out += f" {tag}{tup(v)}"
    return out


def kinds(c):
    """The kinds of layer a case counts in."""
    def vals(key, dflt):
        v = c.get(key, dflt)
        return v if isinstance(v, list) else [v] * c["dims"]
    g = c.get("groups", 1)
    cog = c["out_channels"] // g
    strided = any(s > 1 for s in vals("stride", 1))
    return [f"{c['dims']}-D", "strided" if strided else "unstrided",
            "<= 32 output channels a group" if cog <= 32 else "> 32 output channels a group"]


def audit(table, cases, threshold=0.10):
    """Per dtype: {'dtype', 'cases', 'oracle', 'wins': [(gain, case, setting, base, best)],
    'kinds': {kind: (count, oracle geomean)}}."""
    base, others = table["names"][0], table["names"][1:]
    dtypes = []
    for _, dt, _ in table["rows"]:
        if dt not in dtypes:
            dtypes.append(dt)
    out = []
    for dt in dtypes:
        gains, wins, by_kind = [], [], {}
        for case, d, times in table["rows"]:
            if d != dt or not times[base]:
                continue
            b = min(times[base])
            best_name, best = base, b
            for name in others:
                if times[name] and min(times[name]) < best:
                    best_name, best = name, min(times[name])
            gain = b / best
            gains.append(gain)
            if gain > 1 + threshold:
                wins.append((gain, case, best_name, b, best))
            for k in kinds(cases[case]) if case in cases else []:
                by_kind.setdefault(k, []).append(gain)
        if not gains:
            continue
        wins.sort(reverse=True)
        out.append({"dtype": dt, "cases": len(gains), "oracle": geomean(gains), "wins": wins,
                    "kinds": {k: (len(v), geomean(v)) for k, v in sorted(by_kind.items())}})
    return base, out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", help="env_ab.py's output, the dispatch's setting first")
    ap.add_argument("suite", help="the suite file the log timed")
    ap.add_argument("--threshold", type=float, default=0.10,
                    help="list layers where a forced kernel ran faster by more than this "
                         "(default 0.10)")
    args = ap.parse_args(argv)
    try:
        table = parse(Path(args.log).read_text(encoding="utf-8"))
    except ValueError as e:
        sys.exit(f"dispatch_audit.py: {e}")
    cases = {c["id"]: c for c in json.loads(Path(args.suite).read_text())["cases"]}
    base, rows = audit(table, cases, args.threshold)
    pct = round(100 * args.threshold)
    for r in rows:
        print(f"{r['dtype']}: the fastest setting of each layer against {base}: "
              f"{r['oracle']:.3f}x geomean over {r['cases']} layers; {len(r['wins'])} layers "
              f"faster by more than {pct}% with a kernel forced")
        for kind, (n, g) in r["kinds"].items():
            print(f"  {kind}: {n} layers, {g:.3f}x")
        for gain, case, name, b, best in r["wins"]:
            what = describe(cases[case]) if case in cases else "?"
            print(f"  {case} {gain:.2f}x with {name} ({b:.3f} -> {best:.3f} ms): {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
