#!/usr/bin/env python3
"""Host overhead of one convt call, next to PyTorch's, on a tiny shape.

On a tiny problem the kernel itself takes about a microsecond, so the time per call is
what the Python front, the binding and the launch cost on the host. Measured on the CPU,
and on CUDA when a GPU is visible (there the calls are issued back to back and the
device is synchronised once at the end, so the figure is the host's issue rate).

    python scripts/host_overhead.py                 # CPU and, when available, CUDA
    python scripts/host_overhead.py --device cpu --calls 20000

Cases: the functional call without autograd (inference), the module call with
parameters that require grad (a training forward, which records the autograd node), a
forward+backward step, and convt's C++ call alone on a prepared problem (validation and
launch; on the CPU also the tiny computation itself), so that the Python-side share of
convt's time is visible. Prints microseconds per call (median of --repeats rounds).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import convt


def _rate(fn, calls: int, repeats: int, sync) -> float:
    """Median microseconds per call of fn over `repeats` rounds of `calls` calls."""
    for _ in range(min(calls, 1000)):
        fn()
    sync()
    rounds = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        rounds.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(rounds)


def measure(device: str, calls: int, repeats: int) -> list:
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    torch.manual_seed(0)
    # A tiny 2-D upsampling layer: (1, 4, 8, 8) -> (1, 4, 16, 16), kernel 3, stride 2.
    x = torch.randn(1, 4, 8, 8, device=device)
    ref = torch.nn.ConvTranspose2d(4, 4, 3, stride=2, padding=1, output_padding=1).to(device)
    mod = convt.nn.ConvTranspose2d(4, 4, 3, stride=2, padding=1, output_padding=1).to(device)
    mod.load_state_dict(ref.state_dict())
    w = ref.weight.detach()
    b = ref.bias.detach()
    xg = x.clone().requires_grad_()

    def step(m):
        def run():
            m(xg).sum().backward()

        return run

    cases = [
        (
            "functional, no grad",
            lambda: F.conv_transpose2d(x, w, b, 2, 1, 1),
            lambda: convt.conv_transpose2d(x, w, b, 2, 1, 1),
        ),
        ("module forward, grad", lambda: ref(x), lambda: mod(x)),
        ("module forward+backward", step(ref), step(mod)),
    ]
    rows = []
    for name, torch_fn, convt_fn in cases:
        t_torch = _rate(torch_fn, calls, repeats, sync)
        t_convt = _rate(convt_fn, calls, repeats, sync)
        rows.append((device, name, t_convt, t_torch))

    # The C++ call alone (validation, launch, and on the CPU the computation itself),
    # on a prepared problem and a preallocated output: the rest is Python-side overhead.
    from convt import _C, _kernels

    math, threads = _kernels._exec_args(x)
    params = (2, (2, 2), (1, 1), (1, 1), (1, 1), 1)
    call, shape = _C.prepare_forward(
        _kernels.describe(x), _kernels.describe(w), _kernels.describe(b), params, math, threads, True
    )[:2]
    y = x.new_empty(shape)
    stream = _kernels._raw_stream(x.get_device()) if device == "cuda" else 0
    ptr, strides = y.data_ptr(), y.stride()
    t_cpp = _rate(lambda: _C.run(call, ptr, strides, stream, 0, 0), calls, repeats, sync)
    rows.append((device, "C++ call alone (convt)", t_cpp, float("nan")))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["cpu", "cuda", "all"], default="all")
    parser.add_argument("--calls", type=int, default=5000, help="calls per round")
    parser.add_argument("--repeats", type=int, default=5, help="rounds (the median is printed)")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads for the CPU runs")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    devices = ["cpu", "cuda"] if args.device == "all" else [args.device]
    if "cuda" in devices and not torch.cuda.is_available():
        if args.device == "cuda":
            raise SystemExit("no CUDA device")
        devices.remove("cuda")

    print(f"torch {torch.__version__}, {convt.build_info()}, {args.threads} CPU thread(s)")
    print("shape: x (1, 4, 8, 8), ConvTranspose2d(4, 4, 3, stride=2, padding=1, output_padding=1)")
    print(f"{'device':6s}  {'case':26s}  {'convt us/call':>13s}  {'torch us/call':>13s}  {'ratio':>6s}")
    for device in devices:
        for dev, name, t_convt, t_torch in measure(device, args.calls, args.repeats):
            if t_torch == t_torch:  # not NaN
                print(f"{dev:6s}  {name:26s}  {t_convt:13.2f}  {t_torch:13.2f}  {t_convt / t_torch:6.2f}")
            else:
                print(f"{dev:6s}  {name:26s}  {t_convt:13.2f}  {'':>13s}  {'':>6s}")


if __name__ == "__main__":
    main()
