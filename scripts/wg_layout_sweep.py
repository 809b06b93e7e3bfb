"""Time the persistent wgmma forward with each tile layout its planner can make, to check the
planner's choice of rows and column segments (plan_wgmma_tile, "N and the box").

    python scripts/wg_layout_sweep.py [--suite kernelbench] [--cases kb71,kb78]
                                      [--dtype fp32,bf16] [--reps 10] [--rounds 2]
                                      [--max-layouts 10] [--wgmma] [--json OUT.json]

A layout is a tile's rows x columns of a phase's output row (a row cut into column
segments) in a box of the tile's N positions. For each case and dtype the planner's own
layout is timed against those it makes when its segments are capped at w columns
(CONVT_WG_WV=w) for w = ceil(q / k), k = 1, 2, ... (q: a W phase's output columns, and the
output's width), each distinct layout once (by the plan's description), at most
--max-layouts of them, the most positions used first. Timing: the GPU's time alone (a
sleep kernel queued before each timed call keeps the GPU busy while the host launches it),
the median of --reps calls, in --rounds rounds that alternate the layouts' order; a
layout's time is the least of its rounds' medians. --wgmma runs the wgmma kernel where the
dispatch would take another (CONVT_FORWARD_KERNEL=implicit_gemm_wgmma). Prints one row per
layout: rows x columns, the box, the share of positions used, the time and its ratio to
the planner's.
"""
import argparse
import json
import math
import os
import re

LAYOUT = re.compile(r"tile ([^(]*?) ?\((\d+) rows x (\d+) of a (\d+)x(\d+) box, (\d+)% used\)")


def candidate_caps(out_w, stride_w, most=32):
    """Column caps w that cut a row of q columns into k segments of at most w, for q a W
    phase's output columns (ceil(out_w / stride_w)) and the output's width (zeros inserted
    along W run one phase over all of it), k = 1 .. most; at least 8, widest first."""
    caps = set()
    for q in {math.ceil(out_w / stride_w), out_w}:
        for k in range(1, most + 1):
            w = math.ceil(q / k)
            if w >= 8:
                caps.add(w)
    return sorted(caps, reverse=True)


def parse_layout(what):
    """(tile, rows, columns, box rows, box columns, used share) of a wgmma plan's
    description, or None for another kernel's."""
    m = LAYOUT.search(what)
    if not m or "wgmma" not in what:
        return None
    return (m.group(1).strip(), int(m.group(2)), int(m.group(3)), int(m.group(4)),
            int(m.group(5)), int(m.group(6)) / 100)


def pick_layouts(default_what, capped, most):
    """The layouts to time: the planner's (None, its description) first, then of the capped
    ones ((cap, description) pairs) those whose description differs from every one before,
    at most `most` in all, the most positions used first (ties: the widest cap)."""
    seen = {default_what}
    distinct = []
    for cap, what in capped:
        if what in seen or parse_layout(what) is None:
            continue
        seen.add(what)
        distinct.append((cap, what))
    distinct.sort(key=lambda cw: (-parse_layout(cw[1])[5], -cw[0]))
    return [(None, default_what)] + distinct[:max(0, most - 1)]


def set_cap(cap):
    if cap:
        os.environ["CONVT_WG_WV"] = str(cap)
    else:
        os.environ.pop("CONVT_WG_WV", None)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--suite", default="kernelbench", help="a built-in suite or a suite file")
    ap.add_argument("--cases", default="", help="comma-separated case ids (default: all)")
    ap.add_argument("--dtype", default="fp32,bf16")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--max-layouts", type=int, default=10)
    ap.add_argument("--wgmma", action="store_true",
                    help="the wgmma kernel where the dispatch would take another")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    import torch

    import convt
    from convt.bench.suite import load_suite, select_cases
    from convt.bench.timing import case_forward, gpu_median_ms

    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    if args.wgmma:
        os.environ["CONVT_FORWARD_KERNEL"] = "implicit_gemm_wgmma"
    cases = load_suite(args.suite).cases
    if args.cases:
        cases = select_cases(cases, args.cases.split(","))

    rows = []
    for case in cases:
        for dt in args.dtype.split(","):
            dtype = dtypes[dt]
            op, call = case_forward(case, dtype)

            def describe():
                return str(convt.describe_forward(*call))

            set_cap(None)
            default_what = describe()
            if parse_layout(default_what) is None:
                print(f"{case.id:<14} {dt:<5} not on the wgmma kernel: {default_what}",
                      flush=True)
                continue
            capped = []
            for cap in candidate_caps(case.output_size[-1], case.stride[-1]):
                set_cap(cap)
                capped.append((cap, describe()))
            layouts = pick_layouts(default_what, capped, args.max_layouts)
            best = {}
            for r in range(args.rounds):
                order = layouts if r % 2 == 0 else list(reversed(layouts))
                for cap, what in order:
                    set_cap(cap)
                    ms = gpu_median_ms(lambda: op(*call), args.reps)
                    best[cap] = min(best.get(cap, math.inf), ms)
            set_cap(None)
            base = best[None]
            entries = []
            for cap, what in layouts:
                tile, nr, nw, hb, wb, used = parse_layout(what)
                entries.append({"cap": cap, "tile": tile, "rows": nr, "cols": nw,
                                "box": [hb, wb], "used": used, "ms": best[cap],
                                "vs_planner": base / best[cap]})
                mark = "planner" if cap is None else f"wv {cap}"
                print(f"{case.id:<14} {dt:<5} {mark:<8} {nr:>3} x {nw:<4} box {hb}x{wb:<4} "
                      f"{used:4.0%} used  {best[cap]:8.3f} ms  {base / best[cap]:5.2f}x  {tile}",
                      flush=True)
            fastest = min(entries, key=lambda e: e["ms"])
            print(f"{case.id:<14} {dt:<5} fastest: {fastest['rows']} x {fastest['cols']} "
                  f"({fastest['vs_planner']:.2f}x the planner's)", flush=True)
            rows.append({"case": case.id, "dtype": dt, "layouts": entries})
            del call
            torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"suite": args.suite, "reps": args.reps, "rounds": args.rounds,
                       "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
