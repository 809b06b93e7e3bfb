"""Median time of convt's forward on benchmark cases, nothing else (no PyTorch side, no
error check): for quick comparisons of kernel variants selected by environment variables.

    python scripts/time_cases.py bf16 kb57,kb64 [--reps 10] [--channels-last] [--describe]
    python scripts/time_cases.py fp32 all --suite models [--gpu-time]

fp32s: float32 with TF32 off (strict float32, as `convt bench --math strict` runs it).
"""
import argparse

import torch

import convt
from convt.bench.runner import cudnn_math
from convt.bench.suite import load_suite, select_cases
from convt.bench.timing import case_forward, gpu_median_ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dtype", choices=["fp32", "fp32s", "bf16", "fp16"])
    ap.add_argument("cases", help="comma-separated case ids of the suite, or all")
    ap.add_argument("--suite", default="kernelbench", help="a built-in suite or a suite file")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--channels-last", action="store_true",
                    help="the input with its channels innermost (channels_last strides)")
    ap.add_argument("--describe", action="store_true",
                    help="also print the forward kernel each case runs (convt.describe_forward)")
    ap.add_argument("--gpu-time", action="store_true",
                    help="the GPU's time alone: a sleep kernel queued before each timed call "
                         "keeps the GPU busy while the host launches it (small layers, whose "
                         "host time is as long as their kernels)")
    args = ap.parse_args()
    dtype = {"fp32": torch.float32, "fp32s": torch.float32, "bf16": torch.bfloat16,
             "fp16": torch.float16}[args.dtype]
    cases = load_suite(args.suite).cases
    if args.cases != "all":
        cases = select_cases(cases, args.cases.split(","))
    with cudnn_math("strict" if args.dtype == "fp32s" else None):
        for case in cases:
            op, call = case_forward(case, dtype, channels_last=args.channels_last)
            ms = gpu_median_ms(lambda: op(*call), args.reps, warmup=3, busy=args.gpu_time)
            print(f"{case.id} {args.dtype} {ms:.4f} ms")
            if args.describe:
                print("   ", convt.describe_forward(*call))


if __name__ == "__main__":
    main()
