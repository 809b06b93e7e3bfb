"""convt bench: the timer sees the time a slowed kernel really takes."""

import dataclasses
import time

import pytest

torch = pytest.importorskip("torch")


from convt.bench.timing import (case_forward, gpu_median_ms, median, time_call,
                                time_interleaved)

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_cpu_timer_sees_a_deliberately_slowed_function():
    x = torch.rand(64, 64)
    # (A sleep well above what the product takes on a loaded 2-core machine: 34 ms at worst
    # was seen there, with compilers running beside the tests.)
    sleep_ms = 40.0

    def real():
        return x @ x

    def slowed():
        y = x @ x
        time.sleep(sleep_ms / 1e3)
        return y

    fast, slow = time_interleaved([real, slowed], reps=5, warmup=1, device="cpu")
    assert len(fast.ms) == len(slow.ms) == 5
    # Every slowed sample carries the sleep, the slowed function's median is the larger,
    # and the medians are not absurd. (Not the difference of the fastest samples: on a
    # busy machine the 64 x 64 product alone took 5.7 ms at best, the slowed one 14.2.)
    assert min(slow.ms) >= 0.95 * sleep_ms
    assert slow.median_ms > fast.median_ms
    assert slow.median_ms - fast.median_ms < 10 * sleep_ms


def test_interleaving_order_and_before_each():
    calls = []

    def a():
        calls.append("a")

    def b():
        calls.append("b")

    time_interleaved([a, b], reps=3, warmup=1, device="cpu",
                     before_each=lambda: calls.append("-"))
    assert calls == ["a", "b"] + ["-", "a", "-", "b"] * 3


def test_every_timed_call_runs_the_function():
    count = []
    time_interleaved([lambda: count.append(1)], reps=7, warmup=2, device="cpu")
    assert len(count) == 9
    with pytest.raises(ValueError):
        time_interleaved([lambda: None], reps=0, device="cpu")


def test_median():
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5


def _sleep_cycles_per_ms():
    """torch.cuda._sleep's spin calibrated: its cycles per millisecond on this GPU."""
    torch.cuda._sleep(1000)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    torch.cuda._sleep(10_000_000)
    torch.cuda.synchronize()
    return 10_000_000 / ((time.perf_counter() - t0) * 1e3)


@needs_cuda
def test_cuda_timer_sees_a_deliberately_slowed_kernel():
    """torch.cuda._sleep spins on the GPU while the host returns at once: only a timer
    that records events on the stream and synchronises sees it."""
    device = "cuda"
    x = torch.rand(1024, 1024, device=device)
    sleep_ms = 5.0
    cycles = int(sleep_ms * _sleep_cycles_per_ms())

    def real():
        return x @ x

    def slowed():
        y = x @ x
        torch.cuda._sleep(cycles)
        return y

    # The host returns from slowed() long before the GPU is done (once the libraries
    # behind x @ x are initialised).
    real()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    slowed()
    host_only_ms = (time.perf_counter() - t0) * 1e3
    torch.cuda.synchronize()
    assert host_only_ms < 0.5 * sleep_ms

    fast, slow = time_interleaved([real, slowed], reps=5, warmup=1, device=device)
    extra = slow.median_ms - fast.median_ms
    assert 0.7 * sleep_ms <= extra <= 1.5 * sleep_ms, (extra, sleep_ms, host_only_ms)
    ms, host_ms = time_call(slowed, device)
    assert host_ms >= ms >= 0.7 * sleep_ms


def test_case_forward_runs_the_case():
    """The measuring scripts' call of a suite case: convt's op on the case's tensors, which
    PyTorch's op matches (CPU here; channels_last keeps the values, changes the strides)."""
    import torch.nn.functional as F

    from convt.bench.suite import load_suite

    # (A strided layer of several input pixels, on one sample.)
    case = next(c for c in load_suite("models").cases
                if c.dims == 2 and min(c.input_size) > 1 and max(c.stride) > 1)
    small = dataclasses.replace(case, batch=1)
    for channels_last in (False, True):
        op, args = case_forward(small, torch.float32, device="cpu", channels_last=channels_last)
        x, w = args[0], args[1]
        assert tuple(x.shape) == (small.batch, small.in_channels, *small.input_size)
        assert tuple(w.shape) == (small.in_channels, small.out_channels // small.groups,
                                  *small.kernel_size)
        assert x.is_contiguous() != channels_last
        assert float(x.min()) >= 0.0 and float(x.max()) < 1.0
        ref = F.conv_transpose2d(x.double(), w.double(), None, small.stride, small.padding,
                                 small.output_padding, small.groups, small.dilation)
        assert torch.allclose(op(*args).double(), ref, rtol=1e-4, atol=1e-4)


def test_gpu_median_ms_rejects_no_reps():
    with pytest.raises(ValueError, match="reps must be at least 1, got 0"):
        gpu_median_ms(lambda: None, 0)


@needs_cuda
def test_gpu_median_ms_sees_a_slowed_kernel_and_not_the_sleep_before_it():
    """The GPU time of a call that spins about 1 ms: at least that, and not the half
    millisecond the busy sleep before each timed call takes."""
    x = torch.rand(256, 256, device="cuda")
    cycles_per_ms = _sleep_cycles_per_ms()

    def slowed():
        y = x @ x
        torch.cuda._sleep(int(cycles_per_ms))
        return y

    ms = gpu_median_ms(slowed, 5)
    assert 0.7 <= ms <= 1.4, ms
    assert gpu_median_ms(lambda: x @ x, 5) < 0.5
