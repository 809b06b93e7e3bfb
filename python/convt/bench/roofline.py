"""Roofline arithmetic: flops, bytes, peaks, copy bandwidth.

The roofline time of a case is the time the hardware needs at the very least::

    roofline = max(bytes / copy_bandwidth, flops / peak)

- ``flops`` (forward) = 2 * N * C_in * (C_out/groups) * prod(kernel) * prod(input size).
  For forward+backward the flops are three times that: grad-input and grad-weight each
  cost as much as the forward (grad-bias is a reduction and is not counted).
- ``bytes`` (forward) = input + weight + bias + output, each read or written once, in
  the element size of the dtype. For forward+backward the backward reads grad-output,
  input and weight once and writes grad-input, grad-weight and grad-bias once, so the
  total is 3*input + 3*weight + 2*bias + 2*output elements.
- ``copy_bandwidth`` is measured in the same run by a large device-to-device copy,
  counting the bytes read plus the bytes written.
- ``peak`` is the chip's dense tensor-core rate for the mode: TF32 for float32 with TF32
  allowed, plain FP32 for strict float32, BF16 / FP16 for the half types.

The arithmetic functions are pure Python; the measuring functions import torch.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from convt.bench.suite import Case

__all__ = [
    "ELEMENT_SIZE",
    "KNOWN_GPUS",
    "Peaks",
    "lookup_peaks",
    "measure_copy_bandwidth",
    "measure_matmul_peaks",
    "peak_key",
    "problem_bytes",
    "problem_flops",
    "roofline_ms",
]

#: Bytes per element of the dtypes convt bench runs.
ELEMENT_SIZE = {"fp32": 4, "bf16": 2, "fp16": 2, "fp64": 8}

DIRECTIONS = ("fwd", "fwd+bwd")


def _check_direction(direction: str) -> None:
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")


def problem_flops(case: "Case", direction: str = "fwd") -> int:
    """Flops of one call: the forward's, times 3 for forward+backward."""
    _check_direction(direction)
    return case.flops() * (3 if direction == "fwd+bwd" else 1)


def problem_bytes(case: "Case", dtype: str, direction: str = "fwd") -> int:
    """The fewest bytes one call must move (see the module docstring)."""
    _check_direction(direction)
    n = case.numels()
    if direction == "fwd":
        elements = n["input"] + n["weight"] + n["bias"] + n["output"]
    else:
        elements = 3 * n["input"] + 3 * n["weight"] + 2 * n["bias"] + 2 * n["output"]
    return elements * ELEMENT_SIZE[dtype]


def roofline_ms(flops: float, nbytes: float, peak_tflops: float,
                bandwidth_gbps: float) -> tuple[float, str]:
    """(roofline time in ms, "memory" or "compute" — whichever bound is the larger)."""
    memory_ms = nbytes / (bandwidth_gbps * 1e9) * 1e3
    compute_ms = flops / (peak_tflops * 1e12) * 1e3
    if memory_ms >= compute_ms:
        return memory_ms, "memory"
    return compute_ms, "compute"


# ---------------------------------------------------------------------------------------
# Peaks
# ---------------------------------------------------------------------------------------

#: Which peak a mode is held to: (dtype, math) -> peak key.
def peak_key(dtype: str, math_mode: str | None) -> str:
    if dtype == "fp32":
        return "tf32" if math_mode == "default" else "fp32"
    return dtype


@dataclasses.dataclass(frozen=True)
class Peaks:
    """Dense peak rates in TFLOP/s, and where they come from."""

    fp32: float  # strict float32 (no tensor cores)
    tf32: float
    bf16: float
    fp16: float
    source: str = "table"

    def get(self, key: str) -> float:
        return float(getattr(self, key))

    def as_dict(self) -> dict[str, float]:
        return {"fp32": self.fp32, "tf32": self.tf32, "bf16": self.bf16, "fp16": self.fp16}

    def with_overrides(self, overrides: dict[str, float]) -> "Peaks":
        if not overrides:
            return self
        return dataclasses.replace(self, **overrides, source=f"{self.source} + --peak")


_HOPPER_SXM = dict(fp32=66.9, tf32=494.7, bf16=989.4, fp16=989.4)

#: Datasheet dense peaks: (label, pattern matched against the device name, peaks).
#: Checked in order; the first match wins. Variants not listed here (for example the
#: PCIe and NVL boards, which run at lower clocks) fall back to a measured estimate.
KNOWN_GPUS: list[tuple[str, str, dict[str, float]]] = [
    ("GH200", r"\bGH200\b", _HOPPER_SXM),
    ("H200 SXM", r"\bH200\b(?!.*\bNVL\b)", _HOPPER_SXM),
    ("H100 SXM", r"\bH100\b(?!.*\b(PCIe|NVL)\b)", _HOPPER_SXM),
    ("A100", r"\bA100\b", dict(fp32=19.5, tf32=156.0, bf16=312.0, fp16=312.0)),
    ("L40S", r"\bL40S\b", dict(fp32=91.6, tf32=183.0, bf16=362.05, fp16=362.05)),
]


def lookup_peaks(device_name: str) -> Peaks | None:
    """Datasheet peaks for a known GPU (by its CUDA device name), else None."""
    for label, pattern, figures in KNOWN_GPUS:
        if re.search(pattern, device_name, flags=re.IGNORECASE):
            return Peaks(**figures, source=f"table: {label}")
    return None


# ---------------------------------------------------------------------------------------
# Measurements (need torch and a CUDA device)
# ---------------------------------------------------------------------------------------

def _median(values: list[float]) -> float:
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else 0.5 * (values[mid - 1] + values[mid])


def measure_copy_bandwidth(device, nbytes: int = 1 << 30, reps: int = 10) -> float:
    """Device-to-device copy bandwidth in GB/s (1e9 bytes/s), bytes read plus written.

    Copies ``nbytes`` (default 1 GiB, less when memory is short) from one buffer to
    another ``reps`` times, timed with CUDA events; returns the median rate.
    """
    import torch

    free, _total = torch.cuda.mem_get_info(device)
    nbytes = int(min(nbytes, free // 4))
    nbytes -= nbytes % 4096
    src = torch.empty(nbytes, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    stream = torch.cuda.current_stream(device)
    for _ in range(3):
        dst.copy_(src)
    torch.cuda.synchronize(device)
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record(stream)
        dst.copy_(src)
        end.record(stream)
        end.synchronize()
        times.append(start.elapsed_time(end))
    del src, dst
    return 2 * nbytes / (_median(times) * 1e-3) / 1e9


def measure_matmul_peaks(device, n: int = 8192, reps: int = 5) -> Peaks:
    """Estimated peaks from large square matmuls (used for GPUs not in KNOWN_GPUS).

    A matmul reaches a little less than the datasheet peak, so roofline fractions against
    these figures read slightly higher than against datasheet figures.
    """
    import torch

    saved = torch.get_float32_matmul_precision()
    stream = torch.cuda.current_stream(device)
    rates: dict[str, float] = {}
    try:
        for key, dtype, precision in (("bf16", torch.bfloat16, "highest"),
                                      ("fp16", torch.float16, "highest"),
                                      ("tf32", torch.float32, "high"),
                                      ("fp32", torch.float32, "highest")):
            torch.set_float32_matmul_precision(precision)
            a = torch.rand(n, n, device=device, dtype=dtype)
            b = torch.rand(n, n, device=device, dtype=dtype)
            for _ in range(2):
                torch.matmul(a, b)
            torch.cuda.synchronize(device)
            times = []
            for _ in range(reps):
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record(stream)
                torch.matmul(a, b)
                end.record(stream)
                end.synchronize()
                times.append(start.elapsed_time(end))
            rates[key] = 2 * n**3 / (_median(times) * 1e-3) / 1e12
            del a, b
    finally:
        torch.set_float32_matmul_precision(saved)
    return Peaks(**rates, source="measured: torch.matmul")
