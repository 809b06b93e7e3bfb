#!/usr/bin/env python3
"""Host time per forward call, convt against PyTorch, on benchmark cases.

The GPU is held busy (torch.cuda._sleep) while N calls are enqueued, so the wall time of
enqueueing them is the host's alone: what a call costs before its kernels run, which
bounds small layers (a call's GPU time is only what its kernels take once the host has
launched them). Also the wall time of N calls run back to back (max of host and GPU).

    python scripts/host_time.py bf16 dcgan_g2,hifigan_up2 --suite models [--calls 200]
"""
import argparse
import time

import torch
import torch.nn.functional as F

import convt
from convt.bench.suite import load_suite, select_cases


def host_us(fn, calls: int) -> float:
    """Microseconds per call of enqueueing `calls` calls behind a sleeping GPU."""
    torch.cuda.synchronize()
    torch.cuda._sleep(int(2e9))  # about a second of GPU time: the queue never drains
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / calls * 1e6


def loop_us(fn, calls: int) -> float:
    """Microseconds per call of `calls` calls back to back, synchronized at the end."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def breakdown(x, w, b, case, calls: int) -> str:
    """Host microseconds per call of convt's C++ entry points alone."""
    from convt import _C, _kernels

    params = (case.dims, case.stride, case.padding, case.output_padding, case.dilation, case.groups)
    math = _kernels.cuda_math_mode() if x.dtype is torch.float32 else 0
    descs = (_kernels.describe(x), _kernels.describe(w), None if b is None else _kernels.describe(b))
    prepared = _C.prepare_forward(*descs, params, math, 0, True)
    call, shape, _, ws_bytes, wc_bytes = prepared[:5]
    out = x.new_empty(shape)
    ws = torch.empty(ws_bytes + 256, dtype=torch.uint8, device=x.device)
    wc = torch.empty(wc_bytes + 256, dtype=torch.uint8, device=x.device)
    ws_ptr, wc_ptr = (ws.data_ptr() + 255) & ~255, (wc.data_ptr() + 255) & ~255
    stream = torch.cuda.current_stream().cuda_stream
    if wc_bytes:
        _C.run(call, out.data_ptr(), out.stride(), stream, ws_ptr, ws_bytes, wc_ptr, False)
    parts = {
        "describe x3": lambda: tuple(_kernels.describe(t) for t in (x, w, b) if t is not None),
        "prepare": lambda: _C.prepare_forward(*descs, params, math, 0, True),
        "run": lambda: _C.run(call, out.data_ptr(), out.stride(), stream, ws_ptr, ws_bytes),
        "run, weight kept": lambda: _C.run(call, out.data_ptr(), out.stride(), stream, ws_ptr,
                                           ws_bytes, wc_ptr, bool(wc_bytes)),
        "empty(out)": lambda: x.new_empty(shape),
    }
    return ", ".join(f"{k} {host_us(fn, calls):.1f}" for k, fn in parts.items())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dtype", choices=["fp32", "bf16", "fp16"])
    ap.add_argument("cases", help="comma-separated case ids of the suite, or all")
    ap.add_argument("--suite", default="kernelbench", help="a built-in suite or a suite file")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--breakdown", action="store_true",
                    help="also convt's C++ calls alone: prepare_forward, and run on a "
                         "prepared call with its output, workspace and weight cache allocated")
    args = ap.parse_args()
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    cases = load_suite(args.suite).cases
    if args.cases != "all":
        cases = select_cases(cases, args.cases.split(","))
    print(f"{'case':16} {'dtype':5} {'host us: convt':>15} {'torch':>8} | "
          f"{'loop us: convt':>15} {'torch':>8}")
    for case in cases:
        x = torch.rand(case.batch, case.in_channels, *case.input_size, device="cuda", dtype=dtype)
        w = torch.randn(case.in_channels, case.out_channels // case.groups, *case.kernel_size,
                        device="cuda", dtype=dtype)
        b = torch.randn(case.out_channels, device="cuda", dtype=dtype) if case.bias else None
        kw = dict(stride=case.stride, padding=case.padding, output_padding=case.output_padding,
                  groups=case.groups, dilation=case.dilation)
        ours = getattr(convt, f"conv_transpose{case.dims}d")
        theirs = getattr(F, f"conv_transpose{case.dims}d")

        def run_convt():
            return ours(x, w, b, **kw)

        def run_torch():
            return theirs(x, w, b, **kw)

        with torch.no_grad():
            for fn in (run_convt, run_torch):
                for _ in range(5):
                    fn()
            h = [host_us(run_convt, args.calls), host_us(run_torch, args.calls)]
            l = [loop_us(run_convt, args.calls), loop_us(run_torch, args.calls)]
        print(f"{case.id:16} {args.dtype:5} {h[0]:15.1f} {h[1]:8.1f} | {l[0]:15.1f} {l[1]:8.1f}")
        if args.breakdown:
            print("    " + breakdown(x, w, b, case, args.calls))


if __name__ == "__main__":
    main()
