"""Time the persistent wgmma forward with each K step it can take, to check the planner's
choice of channels and H taps per K step (plan_wgmma_tile).

    python scripts/wg_step_sweep.py [--case kb58,kb70] [--dtype fp32,bf16] [--reps 10]
                                    [--json OUT.json]

For every case and dtype it runs the wgmma kernel (CONVT_FORWARD_KERNEL=implicit_gemm_wgmma)
with the planner's own K step, then with every (channels, H taps) pair asked for through
CONVT_WG_BK / CONVT_WG_HB (the planner declines a pair that leaves no two stages: those are
skipped, as are runs whose plan is not the one asked for), and prints convt's median ms for
each, the planner's pair and the fastest. Timing: CUDA events around each forward call,
median of --reps calls after two warm-up calls (no L2 eviction: compare rows of one run).
"""
import argparse
import json
import os
import re

import torch

import convt
from convt.bench.suite import load_suite, select_cases
from convt.bench.timing import case_forward, gpu_median_ms

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
STEP = re.compile(r"K step (\d+) channels x (\d+) H taps x \d+ W taps, (\d+) stages")


def median_ms(fn, reps):
    return gpu_median_ms(fn, reps, busy=False)


def set_step(bk, hb):
    for name, value in (("CONVT_WG_BK", bk), ("CONVT_WG_HB", hb)):
        if value:
            os.environ[name] = str(value)
        else:
            os.environ.pop(name, None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", default="")
    ap.add_argument("--dtype", default="fp32,bf16")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    os.environ["CONVT_FORWARD_KERNEL"] = "implicit_gemm_wgmma"
    cases = load_suite("kernelbench").cases
    if args.case:
        cases = select_cases(cases, args.case.split(","))
    rows = []
    for case in cases:
        for dt in args.dtype.split(","):
            dtype = DTYPES[dt]
            fn, call = case_forward(case, dtype)

            def describe():
                return str(convt.describe_forward(*call))

            set_step(0, 0)
            m = STEP.search(describe())
            if not m:
                print(f"{case.id:<6} {dt:<5} not on the wgmma kernel: {describe()}")
                continue
            picked = (int(m.group(1)), int(m.group(2)))
            kc = 16 // torch.tensor([], dtype=dtype).element_size()
            kh = case.kernel_size[-2] if case.dims >= 2 else 1  # H is the next-to-last
            timed = {}
            for bk in (2 * kc, 4 * kc, 8 * kc):
                for hb in range(1, kh + 1):
                    set_step(bk, hb)
                    got = STEP.search(describe())
                    if not got or (int(got.group(1)), int(got.group(2))) != (bk, hb):
                        continue
                    timed[(bk, hb)] = (median_ms(lambda: fn(*call), args.reps),
                                       int(got.group(3)))
            set_step(0, 0)
            default_ms = median_ms(lambda: fn(*call), args.reps)
            best = min(timed, key=lambda k: timed[k][0])
            cells = "  ".join(f"{bk}x{hb}:{ms:.3f}({st})" for (bk, hb), (ms, st) in timed.items())
            print(f"{case.id:<6} {dt:<5} default {picked[0]}x{picked[1]} {default_ms:.3f} ms; "
                  f"best {best[0]}x{best[1]} {timed[best][0]:.3f} ms "
                  f"({default_ms / timed[best][0]:.2f}x)  [{cells}]", flush=True)
            rows.append({"case": case.id, "dtype": dt, "picked": picked, "default_ms": default_ms,
                         "steps": [{"bk": bk, "hb": hb, "ms": ms, "stages": st}
                                   for (bk, hb), (ms, st) in timed.items()]})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
