#!/usr/bin/env python3
"""Host time per forward call, convt against PyTorch, on benchmark cases.

The GPU is held busy (torch.cuda._sleep) while N calls are enqueued, so the wall time of
enqueueing them is the host's alone: what a call costs before its kernels run, which
bounds small layers (a call's GPU time is only what its kernels take once the host has
launched them). Also the wall time of N calls run back to back (max of host and GPU).

    python scripts/host_time.py bf16 dcgan_g2,hifigan_up2 --suite models [--calls 200]

--interleaved times convt's calls the benchmark's way instead (the L2 written, a start
event, the call, an end event, synchronized), each after a convt call, after a PyTorch call
of the same layer, or after the GPU slept as long as PyTorch's call ran, and splits each
call's host time into its steps: the Python checks before prepare_forward, prepare_forward,
the allocations and weight-cache lookup between it and run, and run (the C++ launches).

--cold times each host step of a call alone, in the state the benchmark leaves the host in
(the GPU waited for through a call as long as PyTorch's, the L2 written), against the same
step in a hot loop: which steps a host that waited runs slower, and PyTorch's whole call.
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


def _prepared_call(x, w, b, case, stream: int) -> tuple:
    """A forward prepared by hand, its output, workspace and weight cache allocated, the
    weight packed into the cache once: (descs, params, math, prepared, call, shape, out,
    ws_bytes, wc_bytes, ws_ptr, wc_ptr, buffers)."""
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
    if wc_bytes:
        _C.run(call, out.data_ptr(), out.stride(), stream, ws_ptr, ws_bytes, wc_ptr, False)
    return descs, params, math, prepared, call, shape, out, ws_bytes, wc_bytes, ws_ptr, wc_ptr, (ws, wc)


def breakdown(x, w, b, case, calls: int) -> str:
    """Host microseconds per call of convt's C++ entry points alone."""
    from convt import _C, _kernels

    stream = torch.cuda.current_stream().cuda_stream
    descs, params, math, prepared, call, shape, out, ws_bytes, wc_bytes, ws_ptr, wc_ptr, _keep = \
        _prepared_call(x, w, b, case, stream)
    parts = {
        "describe x3": lambda: tuple(_kernels.describe(t) for t in (x, w, b) if t is not None),
        "prepare": lambda: _C.prepare_forward(*descs, params, math, 0, True),
        "run": lambda: _C.run(call, out.data_ptr(), out.stride(), stream, ws_ptr, ws_bytes),
        "run, weight kept": lambda: _C.run(call, out.data_ptr(), out.stride(), stream, ws_ptr,
                                           ws_bytes, wc_ptr, bool(wc_bytes)),
        "empty(out)": lambda: x.new_empty(shape),
    }
    return ", ".join(f"{k} {host_us(fn, calls):.1f}" for k, fn in parts.items())


class _TimedC:
    """convt._C with prepare_forward and run stamped (perf_counter) on the way in and out."""

    def __init__(self, real):
        self._real = real
        self.marks = {}

    def __getattr__(self, name):
        return getattr(self._real, name)

    def prepare_forward(self, *args):
        self.marks["prepare"] = time.perf_counter()
        r = self._real.prepare_forward(*args)
        self.marks["prepared"] = time.perf_counter()
        return r

    def run(self, *args):
        self.marks["run"] = time.perf_counter()
        self._real.run(*args)
        self.marks["ran"] = time.perf_counter()


def _torch_sleep(run_torch, stream) -> tuple:
    """(PyTorch's event time in ms, the torch.cuda._sleep cycles that last as long): the
    sleep stands in for PyTorch's call."""
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(stream)
    run_torch()
    e.record(stream)
    e.synchronize()
    torch_ms = s.elapsed_time(e)
    s.record(stream)
    torch.cuda._sleep(1000000)
    e.record(stream)
    e.synchronize()
    return torch_ms, int(1000000 * torch_ms / max(s.elapsed_time(e), 1e-3))


def interleaved(run_convt, run_torch, reps: int) -> str:
    """Medians over reps of convt's host steps (us) and its event time (ms), the
    benchmark's way, after each kind of preceding call."""
    import statistics

    from convt import _kernels
    from convt.bench.timing import L2Flusher

    flush = L2Flusher("cuda")
    timed = _TimedC(_kernels._C)
    real = _kernels._C
    stream = torch.cuda.current_stream()
    torch_ms, cycles = _torch_sleep(run_torch, stream)
    before = {"convt": run_convt, "torch": run_torch,
              "sleep": lambda: torch.cuda._sleep(cycles)}
    rows = []

    def settle(pre):
        """The moment the benchmark times a call at: `pre` run and waited for, L2 written."""
        flush()
        pre()
        torch.cuda.synchronize()
        flush()

    _kernels._C = timed
    try:
        for name, pre in before.items():
            steps = {k: [] for k in ("checks", "prepare", "alloc", "run", "after", "total")}
            gpu = []
            for _ in range(reps):
                settle(pre)
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                t0 = time.perf_counter()
                start.record(stream)
                out = run_convt()
                end.record(stream)
                t1 = time.perf_counter()
                end.synchronize()
                del out
                m = timed.marks
                steps["checks"].append(m["prepare"] - t0)
                steps["prepare"].append(m["prepared"] - m["prepare"])
                steps["alloc"].append(m["run"] - m["prepared"])
                steps["run"].append(m["ran"] - m["run"])
                steps["after"].append(t1 - m["ran"])
                steps["total"].append(t1 - t0)
                gpu.append(start.elapsed_time(end))
            # The same moment, a fixed piece of pure Python in place of the call: whether the
            # host runs slower there than in a loop (its state after waiting for the GPU).
            py = []
            for _ in range(reps):
                settle(pre)
                t0 = time.perf_counter()
                _python_work()
                py.append(time.perf_counter() - t0)
            med = {k: statistics.median(v) * 1e6 for k, v in steps.items()}
            rows.append(f"after {name:5}: event {statistics.median(gpu):.3f} ms; host us: "
                        + ", ".join(f"{k} {v:.1f}" for k, v in med.items())
                        + f"; python work {statistics.median(py) * 1e6:.1f}")
    finally:
        _kernels._C = real
    hot = min(_timed(_python_work) for _ in range(200)) * 1e6
    return (f"(PyTorch {torch_ms:.3f} ms; the python work {hot:.1f} us in a loop)\n    "
            + "\n    ".join(rows))


def cold_steps(x, w, b, case, run_convt, run_torch, reps: int) -> str:
    """Each host step of a forward call timed alone after the GPU was waited for (a sleep
    as long as PyTorch's call, then the L2 written), and in a hot loop: us, medians."""
    import statistics

    from convt import _C, _dispatch, _kernels
    from convt.bench.timing import L2Flusher

    flush = L2Flusher("cuda")
    stream = torch.cuda.current_stream()
    torch_ms, cycles = _torch_sleep(run_torch, stream)
    descs, params, math, prepared, call, shape, out, ws_bytes, wc_bytes, ws_ptr, wc_ptr, _keep = \
        _prepared_call(x, w, b, case, stream.cuda_stream)
    ev = torch.cuda.Event(enable_timing=True)
    steps = {
        "event record": lambda: ev.record(stream),
        "uses_dispatcher": lambda: _dispatch.uses_dispatcher(x, w, b),
        "math mode": _kernels.cuda_math_mode,
        "describe x, w": lambda: (_kernels.describe(x), _kernels.describe(w)),
        "prepare_forward": lambda: _C.prepare_forward(*descs, params, math, 0, True),
        "new_empty(out)": lambda: x.new_empty(shape),
        "empty(workspace)": lambda: torch.empty(ws_bytes + 256, dtype=torch.uint8, device=x.device),
        "current stream": lambda: _kernels._raw_stream(x.get_device()),
        "weight tag": lambda: _kernels._weight_tag(w, prepared[5], stream.cuda_stream),
        "run, weight kept": lambda: _C.run(call, out.data_ptr(), out.stride(), stream.cuda_stream,
                                           ws_ptr, ws_bytes, wc_ptr, bool(wc_bytes)),
        "convt call": run_convt,
        "PyTorch call": run_torch,
        "python work": _python_work,
    }
    rows = []
    for name, fn in steps.items():
        cold, hot = [], []
        for _ in range(reps):
            torch.cuda._sleep(cycles)
            torch.cuda.synchronize()
            flush()
            t0 = time.perf_counter()
            r = fn()
            cold.append(time.perf_counter() - t0)
            del r
        torch.cuda.synchronize()
        for _ in range(reps):
            t0 = time.perf_counter()
            r = fn()
            hot.append(time.perf_counter() - t0)
            del r
        torch.cuda.synchronize()
        rows.append(f"{name:18} cold {statistics.median(cold) * 1e6:7.1f}  hot {statistics.median(hot) * 1e6:7.1f}")
    return f"(after a sleep of PyTorch's {torch_ms:.3f} ms; us per step)\n    " + "\n    ".join(rows)


def _python_work() -> int:
    """A fixed few microseconds of interpreter work (dicts, tuples, calls)."""
    d = {}
    for i in range(64):
        d[(i, i & 7)] = len(str(i))
    return sum(d.values())


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dtype", choices=["fp32", "bf16", "fp16"])
    ap.add_argument("cases", help="comma-separated case ids of the suite, or all")
    ap.add_argument("--suite", default="kernelbench", help="a built-in suite or a suite file")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--breakdown", action="store_true",
                    help="also convt's C++ calls alone: prepare_forward, and run on a "
                         "prepared call with its output, workspace and weight cache allocated")
    ap.add_argument("--interleaved", action="store_true",
                    help="time convt's calls the benchmark's way after each kind of call, "
                         "with its host steps (see the module doc)")
    ap.add_argument("--cold", action="store_true",
                    help="time each host step of a call alone after the GPU was waited for, "
                         "and hot (see the module doc)")
    ap.add_argument("--reps", type=int, default=30, help="calls timed with --interleaved or --cold")
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
        if args.interleaved:
            with torch.no_grad():
                print("    " + interleaved(run_convt, run_torch, args.reps))
        if args.cold:
            with torch.no_grad():
                print("    " + cold_steps(x, w, b, case, run_convt, run_torch, args.reps))


if __name__ == "__main__":
    main()
