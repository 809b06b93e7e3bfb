#!/usr/bin/env python3
"""A KernelBench-style ModelNew on convt, for level-1 problem "64_conv_transposed_1D".

KernelBench gives a reference ``Model`` (a thin module around nn.ConvTranspose1d),
``get_init_inputs()`` (its constructor arguments) and ``get_inputs()`` (its inputs); a
solution is a ``ModelNew`` with the same constructor, the same parameter names, shapes
and initialisation, and the same outputs. Here ``ModelNew`` swaps the layer for
``convt.nn.ConvTranspose1d``, which subclasses PyTorch's: same attribute
(``conv1d_transpose``), same parameters, same random draws under the same seed.

This script builds both models the way the KernelBench harness does (same seed for both
constructors), checks that the parameters are identical and the outputs agree
(``torch.allclose`` with atol = rtol = 1e-2, and reports 1e-4), and on CUDA times both
with CUDA events (interleaved, after warm-up, median of --runs).

    python examples/kernelbench_modelnew.py               # CUDA if available, else the CPU
    python examples/kernelbench_modelnew.py --device cpu  # on the CPU (shorter length)
    python examples/kernelbench_modelnew.py --length 4096
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn as nn

import convt

# ---------------------------------------------------------------------------------------
# The problem, as KernelBench states it
# ---------------------------------------------------------------------------------------
batch_size = 64
in_channels = 128
out_channels = 128
kernel_size = 3
length = 65536


class Model(nn.Module):
    """A transposed 1-D convolution (the KernelBench reference)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1, bias=False):
        super().__init__()
        self.conv1d_transpose = nn.ConvTranspose1d(
            in_channels,
            out_channels,
            kernel_size,
            stride=stride,
            padding=padding,
            output_padding=output_padding,
            groups=groups,
            bias=bias,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv1d_transpose(x)


def get_inputs():
    return [torch.rand(batch_size, in_channels, length)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]


# ---------------------------------------------------------------------------------------
# The solution
# ---------------------------------------------------------------------------------------
class ModelNew(nn.Module):
    """Model on convt: the same constructor, parameters and initialisation."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1, bias=False):
        super().__init__()
        self.conv1d_transpose = convt.nn.ConvTranspose1d(
            in_channels,
            out_channels,
            kernel_size,
            stride=stride,
            padding=padding,
            output_padding=output_padding,
            groups=groups,
            bias=bias,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv1d_transpose(x)


# ---------------------------------------------------------------------------------------
# Check and time, as the KernelBench harness does
# ---------------------------------------------------------------------------------------
def _time_cuda(fns, x, runs: int, warmup: int = 5):
    """Median milliseconds per call of each fn, interleaved, with CUDA events."""
    for _ in range(warmup):
        for fn in fns:
            fn(x)
    torch.cuda.synchronize()
    times = [[] for _ in fns]
    for _ in range(runs):
        for i, fn in enumerate(fns):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn(x)
            end.record()
            torch.cuda.synchronize()
            times[i].append(start.elapsed_time(end))
    return [statistics.median(t) for t in times]


def _time_cpu(fns, x, runs: int, warmup: int = 1):
    for _ in range(warmup):
        for fn in fns:
            fn(x)
    times = [[] for _ in fns]
    for _ in range(runs):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn(x)
            times[i].append((time.perf_counter() - t0) * 1e3)
    return [statistics.median(t) for t in times]


def main() -> None:
    global length
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    parser.add_argument("--length", type=int, default=None, help="input length (default: 65536 on CUDA, 512 on the CPU)")
    parser.add_argument("--runs", type=int, default=None, help="timed runs (default: 20 on CUDA, 3 on the CPU)")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: use --device cpu")
    length = args.length or (65536 if device == "cuda" else 512)
    runs = args.runs or (20 if device == "cuda" else 3)

    torch.manual_seed(args.seed)
    model = Model(*get_init_inputs()).to(device)
    torch.manual_seed(args.seed)
    model_new = ModelNew(*get_init_inputs()).to(device)
    for (name, p), (_, q) in zip(model.named_parameters(), model_new.named_parameters()):
        assert torch.equal(p, q), f"parameter {name} differs"

    torch.manual_seed(args.seed)
    inputs = [t.to(device) for t in get_inputs()]
    print(f"{convt.build_info()}, torch {torch.__version__}, device {device}")
    print(f"x {tuple(inputs[0].shape)}, ConvTranspose1d({in_channels}, {out_channels}, {kernel_size})")

    with torch.no_grad():
        ref = model(*inputs)
        out = model_new(*inputs)
        if device == "cuda":
            torch.cuda.synchronize()
    assert out.shape == ref.shape, (out.shape, ref.shape)
    max_abs = (out - ref).abs().max().item()
    rel = max_abs / ref.abs().max().item()
    ok_2 = torch.allclose(out, ref, atol=1e-2, rtol=1e-2)
    ok_4 = torch.allclose(out, ref, atol=1e-4, rtol=1e-4)
    print(f"max |ModelNew - Model| = {max_abs:.3g} (relative to max |Model|: {rel:.3g})")
    print(f"allclose(atol=rtol=1e-2): {ok_2}   allclose(atol=rtol=1e-4): {ok_4}")
    if not ok_2:
        raise SystemExit("ModelNew does not match Model")

    with torch.no_grad():
        timer = _time_cuda if device == "cuda" else _time_cpu
        t_ref, t_new = timer([model, model_new], inputs[0], runs)
    print(f"Model (PyTorch): {t_ref:.3f} ms   ModelNew (convt): {t_new:.3f} ms   speedup {t_ref / t_new:.2f}x "
          f"(median of {runs}, interleaved{', CUDA events' if device == 'cuda' else ''})")


if __name__ == "__main__":
    main()
