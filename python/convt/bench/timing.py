"""Timing: interleaved, synchronised measurements of several callables.

On a CUDA device each call is bracketed by two CUDA events recorded on the current
stream; the host waits for the end event before reading the elapsed time, so the time is
what the GPU spent from the start event to the end event (including any gap where it
waited for the host to launch work). After the end event the whole device is
synchronised too, and the host-side time from just before the start event to that point
is kept as ``host_ms``, an upper bound that also covers work left running on other
streams. On the CPU each call is timed with ``time.perf_counter``.

The callables are run in turn (A, B, A, B, ...), warm-up rounds first. Whatever a call
returns is kept alive until its time is taken and then dropped, so every timed call
allocates and computes its own results. An optional ``before_each`` hook runs before
every timed call, outside the timed region (the benchmark uses it to evict the L2 cache).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Any, Callable, Sequence

__all__ = ["L2Flusher", "Samples", "case_forward", "gpu_median_ms", "median", "time_call",
           "time_interleaved"]


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


@dataclasses.dataclass
class Samples:
    """The times of one callable, in milliseconds, one entry per timed call."""

    ms: list[float] = dataclasses.field(default_factory=list)
    host_ms: list[float] = dataclasses.field(default_factory=list)

    @property
    def median_ms(self) -> float:
        return median(self.ms)

    @property
    def median_host_ms(self) -> float:
        return median(self.host_ms)


def _is_cuda(device: Any) -> bool:
    return str(device).startswith("cuda")


def time_call(fn: Callable[[], Any], device: Any = "cpu") -> tuple[float, float]:
    """Time one call of ``fn``: (device time in ms, host time in ms)."""
    if _is_cuda(device):
        import torch

        stream = torch.cuda.current_stream(device)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        start.record(stream)
        result = fn()
        end.record(stream)
        end.synchronize()
        torch.cuda.synchronize(device)
        t1 = time.perf_counter()
        ms = start.elapsed_time(end)
        del result
        return ms, (t1 - t0) * 1e3
    t0 = time.perf_counter()
    result = fn()
    t1 = time.perf_counter()
    del result
    ms = (t1 - t0) * 1e3
    return ms, ms


def _sync(device: Any) -> None:
    if _is_cuda(device):
        import torch

        torch.cuda.synchronize(device)


def time_interleaved(
    fns: Sequence[Callable[[], Any]],
    *,
    reps: int,
    warmup: int = 0,
    device: Any = "cpu",
    before_each: Callable[[], Any] | None = None,
) -> list[Samples]:
    """Time each callable ``reps`` times, interleaved, after ``warmup`` untimed rounds.

    Returns one Samples per callable, in the order given.
    """
    if reps < 1:
        raise ValueError(f"reps must be at least 1, got {reps}")
    for _ in range(max(0, warmup)):
        for fn in fns:
            result = fn()
            _sync(device)
            del result
    samples = [Samples() for _ in fns]
    for _ in range(reps):
        for fn, s in zip(fns, samples):
            if before_each is not None:
                before_each()
            ms, host_ms = time_call(fn, device)
            s.ms.append(ms)
            s.host_ms.append(host_ms)
    return samples


class L2Flusher:
    """Evicts the GPU's L2 cache by writing a buffer larger than it.

    The buffer is twice the L2 size and at least 128 MiB. Calling the flusher enqueues
    the write on the current stream; a timed region started afterwards on the same
    stream begins once the write is done, so the write itself is never timed.
    """

    def __init__(self, device: Any):
        import torch

        props = torch.cuda.get_device_properties(device)
        l2 = int(getattr(props, "L2_cache_size", 0) or 0)
        self.nbytes = max(2 * l2, 128 << 20)
        self._buffer = torch.empty(self.nbytes, dtype=torch.uint8, device=device)

    def __call__(self) -> None:
        self._buffer.zero_()


def case_forward(case: Any, dtype: Any, device: Any = "cuda",
                 channels_last: bool = False) -> tuple[Callable[..., Any], tuple]:
    """convt's forward of a suite case on fresh tensors, for the measuring scripts: (op,
    args), op(*args) running it. x uniform in [0, 1) (channels innermost where
    channels_last), the weight normal, no bias."""
    import torch

    import convt

    x = torch.rand(case.batch, case.in_channels, *case.input_size, device=device, dtype=dtype)
    if channels_last:
        x = x.movedim(1, -1).contiguous().movedim(-1, 1)
    w = torch.randn(case.in_channels, case.out_channels // case.groups, *case.kernel_size,
                    device=device, dtype=dtype)
    op = getattr(convt, f"conv_transpose{case.dims}d")
    return op, (x, w, None, case.stride, case.padding, case.output_padding, case.groups,
                case.dilation)


def gpu_median_ms(fn: Callable[[], Any], reps: int, warmup: int = 2,
                  busy: bool = True) -> float:
    """Median CUDA-event time of ``fn()`` over ``reps`` calls after ``warmup`` untimed ones.
    busy: a sleep kernel (about half a millisecond) queued before each timed call keeps the
    GPU busy while the host launches the call's kernels, so that the time is the GPU's
    alone (small layers, whose host time is as long as their kernels)."""
    import torch

    if reps < 1:
        raise ValueError(f"reps must be at least 1, got {reps}")
    for _ in range(max(0, warmup)):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        if busy:
            torch.cuda._sleep(1_000_000)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return median(times)
