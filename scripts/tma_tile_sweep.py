"""Time the TMA-fed forward with each of its tiles, to check the planner's tile heuristic.

    python scripts/tma_tile_sweep.py [--case kb57,kb65] [--dtype fp32,bf16] [--math default]
                                     [--reps 10] [--json OUT.json]

Runs `convt bench` once with the dispatcher's own choice and once per tile asked for with
CONVT_TMA_TILE=BNxBK (32x16, 32x32, 64x16, 64x32; the planner ignores a tile that leaves
fewer than two pipeline stages or outgrows the workspace, so such a run repeats its
default), each in a fresh process, and prints one row per (case, mode): convt's median ms
per tile, the tile the dispatcher picks (from convt's describe_forward), and the best.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

TILES = ["32x16", "32x32", "64x16", "64x32"]
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def bench(args, tile):
    env = dict(os.environ)
    env.pop("CONVT_TMA_TILE", None)
    if tile:
        env["CONVT_TMA_TILE"] = tile
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "bench.json")
        cmd = [sys.executable, "-m", "convt", "bench", "--dtype", args.dtype, "--math", args.math,
               "--reps", str(args.reps), "--warmup", "2", "--json", out, "-q"]
        if args.case:
            cmd += ["--case", args.case]
        subprocess.run(cmd, env=env, check=False, stdout=subprocess.DEVNULL)
        with open(out) as f:
            doc = json.load(f)
    return {(r["case"], r["mode"]): (r["convt"] or {}).get("ms") for r in doc["results"]}


def dispatcher_tiles(args):
    """(case, mode) -> "BNxBK" of the dispatcher's TMA plan, or its other kernel's name."""
    import torch

    from convt import _C, _kernels
    from convt.bench.suite import load_suite, select_cases

    def desc(sizes, dtype):  # a contiguous tensor on cuda:0, shapes only (no data)
        strides, acc = [], 1
        for size in reversed(sizes):
            strides.append(acc)
            acc *= max(int(size), 1)
        return (0, tuple(sizes), tuple(reversed(strides)), _kernels.DTYPE_CODES[dtype], 0)

    cases = load_suite("kernelbench").cases
    if args.case:
        cases = select_cases(cases, args.case.split(","))
    out = {}
    for case in cases:
        for dt in args.dtype.split(","):
            for math in args.math.split(","):
                if dt != "fp32" and math == "strict":
                    continue
                dtype = getattr(torch, DTYPES[dt])
                x = desc((case.batch, case.in_channels, *case.input_size), dtype)
                w = desc((case.in_channels, case.out_channels // case.groups, *case.kernel_size),
                         dtype)
                params = (case.dims, case.stride, case.padding, case.output_padding,
                          case.dilation, case.groups)
                code = 1 if (dt == "fp32" and math == "strict") else 0
                text = str(_C.describe_forward(x, w, None, params, code))
                m = re.search(r"tile 128 positions x (\d+) channels x (\d+)", text)
                mode = f"{dt}/{math}/fwd" if dt == "fp32" else f"{dt}/fwd"
                out[(case.id, mode)] = f"{m.group(1)}x{m.group(2)}" if m else text.split(",")[0]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", default="")
    ap.add_argument("--dtype", default="fp32,bf16")
    ap.add_argument("--math", default="default")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    runs = {"default": bench(args, None)}
    for tile in TILES:
        runs[tile] = bench(args, tile)
    picked = dispatcher_tiles(args)
    keys = sorted(runs["default"])
    print(f"{'case':<6} {'mode':<18} {'default':>8} " + " ".join(f"{t:>8}" for t in TILES) +
          f"  {'picked':<8} {'best':<8} best/default")
    rows = []
    for key in keys:
        ms = {name: runs[name].get(key) for name in runs}
        timed = {t: ms[t] for t in TILES if ms[t]}
        best = min(timed, key=timed.get) if timed else None
        ratio = (timed[best] / ms["default"]) if best and ms["default"] else None
        fmt = lambda v: f"{v:8.3f}" if v else f"{'-':>8}"
        print(f"{key[0]:<6} {key[1]:<18} {fmt(ms['default'])} " +
              " ".join(fmt(ms[t]) for t in TILES) +
              f"  {picked.get(key, '?'):<8} {best or '-':<8} " +
              (f"{ratio:.2f}" if ratio else "-"))
        rows.append({"case": key[0], "mode": key[1], "ms": ms, "picked": picked.get(key),
                     "best": best})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"tiles": TILES, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
