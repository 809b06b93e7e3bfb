"""The GPU's time alone for convt's forward and PyTorch's, case by case: where a layer is
slower than PyTorch end to end, whether its kernels or the host are.

Each timed call follows an L2 flush (as in ``convt bench``) and a sleep kernel that keeps
the GPU busy while the host launches the call, so the time between the events is the
call's kernels only. ``--kernels`` also lists each side's kernels (torch.profiler, mean
microseconds per call).

    python scripts/kernel_times.py --suite models --dtype fp32,bf16 [--cases a,b] [--kernels]
    python scripts/kernel_times.py --dtype bf16 --cases kb69,kb73 --json out.json
"""
import argparse
import json
import sys

import torch

from convt.bench.suite import load_suite, select_cases
from convt.bench.timing import L2Flusher, case_forward, median


def gpu_times_ms(fn, flush, reps):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        flush()
        torch.cuda._sleep(1_000_000)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return times


def kernel_list(fn, flush, reps):
    """(name, mean us per call) of the CUDA kernels fn launches, the flush's left out."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            flush()
            fn()
        torch.cuda.synchronize()
    totals = {}
    for ev in prof.events():
        if ev.device_type != torch.autograd.DeviceType.CUDA:
            continue
        name = ev.name
        if "FillFunctor" in name or "fill_kernel" in name or name.startswith("Memset"):
            continue  # the flush (zero_)
        totals[name] = totals.get(name, 0.0) + ev.device_time / reps
    return sorted(totals.items(), key=lambda kv: -kv[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--suite", default="kernelbench", help="a built-in suite or a suite file")
    ap.add_argument("--cases", default="", help="comma-separated case ids (default: all)")
    ap.add_argument("--dtype", default="fp32,bf16")
    ap.add_argument("--math", default="default", choices=["default", "strict"])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--kernels", action="store_true", help="also list each side's kernels")
    ap.add_argument("--json", default=None, help="write the rows here")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("kernel_times.py needs a CUDA device")
    import convt  # noqa: F401  (the extension, before any case runs)

    tf32 = args.math == "default"
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    cases = load_suite(args.suite).cases
    if args.cases:
        cases = select_cases(cases, args.cases.split(","))
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    flush = L2Flusher("cuda")
    rows = []
    for case in cases:
        for name in args.dtype.split(","):
            op, call = case_forward(case, dtypes[name])
            ref = getattr(torch.nn.functional, f"conv_transpose{case.dims}d")
            x, w, b, stride, padding, output_padding, groups, dilation = call
            sides = {
                "convt": lambda: op(*call),
                "pytorch": lambda: ref(x, w, b, stride, padding, output_padding, groups,
                                       dilation),
            }
            row = {"case": case.id, "dtype": name, "math": args.math}
            for side, fn in sides.items():
                row[f"{side}_ms"] = median(gpu_times_ms(fn, flush, args.reps))
                if args.kernels:
                    row[f"{side}_kernels"] = [(k, round(us, 2))
                                              for k, us in kernel_list(fn, flush, 3)]
            row["ratio"] = row["pytorch_ms"] / row["convt_ms"]
            rows.append(row)
            print(f"{case.id} {name} GPU time: convt {row['convt_ms']:.4f} ms, PyTorch "
                  f"{row['pytorch_ms']:.4f} ms, PyTorch/convt {row['ratio']:.2f}", flush=True)
            if args.kernels:
                for side in sides:
                    for k, us in row[f"{side}_kernels"]:
                        print(f"    {side:8s} {us:9.2f} us  {k[:150]}")
            del call, x, w
            torch.cuda.empty_cache()
    ratios = [r["ratio"] for r in rows]
    if ratios:
        geo = float(torch.tensor(ratios).log().mean().exp())
        print(f"geomean PyTorch/convt (GPU time): {geo:.3f} over {len(ratios)} rows")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"suite": args.suite, "math": args.math, "device":
                       torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
