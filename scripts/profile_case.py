"""Run one convt forward of a benchmark case, for profilers (ncu, compute-sanitizer).

    python scripts/profile_case.py kb57 --dtype bf16 [--batch 2] [--reps 3] [--kernel NAME]
    python scripts/profile_case.py dcgan_g2 --suite models --dtype bf16

--kernel sets CONVT_FORWARD_KERNEL (auto, direct, implicit_gemm_tma, implicit_gemm_wgmma...).
"""
import argparse
import os

import torch

import convt
from convt.bench.suite import load_suite, select_cases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--dtype", default="bf16", choices=["fp32", "bf16", "fp16"])
    ap.add_argument("--batch", type=int, default=None, help="override the batch size")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--kernel", default=None, help="CONVT_FORWARD_KERNEL for this run")
    ap.add_argument("--suite", default="kernelbench", help="a built-in suite or a suite file")
    args = ap.parse_args()
    if args.kernel:
        os.environ["CONVT_FORWARD_KERNEL"] = args.kernel
    case = select_cases(load_suite(args.suite).cases, [args.case])[0]
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    n = args.batch or case.batch
    x = torch.rand(n, case.in_channels, *case.input_size, device="cuda", dtype=dtype)
    w = torch.randn(case.in_channels, case.out_channels // case.groups, *case.kernel_size,
                    device="cuda", dtype=dtype)
    fn = getattr(convt, f"conv_transpose{case.dims}d")
    for _ in range(args.reps):
        y = fn(x, w, None, case.stride, case.padding, case.output_padding, case.groups,
               case.dilation)
    torch.cuda.synchronize()
    print(case.id, tuple(y.shape), y.dtype)


if __name__ == "__main__":
    main()
