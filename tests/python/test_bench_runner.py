"""convt bench: the runner checks, times and refuses to be flattered (CPU, injected
implementations)."""

import math

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402


from convt.bench.runner import (  # noqa: E402
    Bench,
    BenchConfig,
    ImplementationError,
    Mode,
    build_modes,
    cudnn_math,
    relative_error,
    resolve_implementation,
)
from convt.bench.suite import parse_shape  # noqa: E402

SMALL = parse_shape("2d N=2 C=4->6 in=5x7 k=3 s=2 p=1 op=1 bias", default_id="small")
SMALL_1D = parse_shape("1d N=2 C=4->4 in=9 k=4 s=2 p=1 g=2", default_id="small1d")
FWD = Mode("fp32", "strict", "fwd")
FWD_BWD = Mode("fp32", "strict", "fwd+bwd")


def bench(impl, reps=3, **kw):
    return Bench(BenchConfig(device="cpu", reps=reps, warmup=1, **kw), impl=impl)


class Wrapped:
    """Torch's ops, with ``transform(dims, args, kwargs, call)`` in between."""

    name = "wrapped"

    def __init__(self, transform):
        self.transform = transform

    def _op(self, dims):
        op = getattr(F, f"conv_transpose{dims}d")
        return lambda *a, **k: self.transform(dims, a, k, op)

    @property
    def conv_transpose1d(self):
        return self._op(1)

    @property
    def conv_transpose2d(self):
        return self._op(2)

    @property
    def conv_transpose3d(self):
        return self._op(3)


# ---------------------------------------------------------------------------------------
# Modes, precision switch, errors, implementations
# ---------------------------------------------------------------------------------------

def test_modes_cover_every_combination_once():
    modes = build_modes(["fp32", "bf16"], ["default", "strict"], ["fwd", "fwd+bwd"], "cuda")
    assert [m.label for m in modes] == [
        "fp32/default/fwd", "fp32/default/fwd+bwd", "fp32/strict/fwd", "fp32/strict/fwd+bwd",
        "bf16/fwd", "bf16/fwd+bwd"]
    assert [m.budget for m in modes] == [8e-4, 8e-4, 4e-6, 4e-6, 1e-2, 1e-2]
    assert [m.peak_key for m in modes[::2]] == ["tf32", "fp32", "bf16"]
    # no TF32 on the CPU: float32 runs strict
    cpu = build_modes(["fp32", "fp16"], ["default", "strict"], ["fwd"], "cpu")
    assert [m.label for m in cpu] == ["fp32/strict/fwd", "fp16/fwd"]
    assert cpu[1].budget == 1.5e-3
    with pytest.raises(ValueError, match="unknown dtype 'fp64'"):
        build_modes(["fp64"], ["default"], ["fwd"])


def test_cudnn_math_sets_and_restores():
    cudnn = torch.backends.cudnn
    before = cudnn.allow_tf32
    with cudnn_math("strict"):
        assert cudnn.allow_tf32 is False
        with cudnn_math("default"):
            assert cudnn.allow_tf32 is True
        assert cudnn.allow_tf32 is False
    assert cudnn.allow_tf32 == before
    with cudnn_math(None):
        assert cudnn.allow_tf32 == before


def test_relative_error():
    ref = torch.tensor([[1.0, -4.0], [2.0, 0.5]], dtype=torch.float64)
    out = ref.to(torch.float32).clone()
    assert relative_error(out, ref) == 0.0
    out[1, 0] += 0.5
    assert relative_error(out, ref) == pytest.approx(0.5 / 4.0)
    out[0, 0] = float("nan")
    assert math.isnan(relative_error(out, ref))
    assert relative_error(torch.zeros(3), torch.zeros(3, dtype=torch.float64)) == 0.0
    assert relative_error(torch.ones(3), torch.zeros(3, dtype=torch.float64)) == math.inf
    with pytest.raises(Exception, match="shape"):
        relative_error(torch.zeros(2, 3), torch.zeros(3, 2, dtype=torch.float64))


def test_resolve_implementation():
    impl = resolve_implementation("torch.nn.functional")
    assert impl.op(2) is F.conv_transpose2d and impl.label == "functional"
    assert resolve_implementation("torch:nn.functional").op(3) is F.conv_transpose3d
    with pytest.raises(ImplementationError, match="no conv_transpose"):
        resolve_implementation("math")
    with pytest.raises(ImplementationError, match="cannot load"):
        resolve_implementation("no_such_module_for_convt_bench")
    wrapped = resolve_implementation(Wrapped(lambda d, a, k, op: op(*a, **k)))
    assert wrapped.name == "wrapped"


# ---------------------------------------------------------------------------------------
# Runs
# ---------------------------------------------------------------------------------------

def test_same_implementation_passes_with_equal_errors():
    b = bench(F)
    run = b.run([SMALL, SMALL_1D], [FWD, FWD_BWD, Mode("bf16", None, "fwd")])
    assert run.ok and len(run.results) == 6
    for r in run.results:
        assert r.status == "ok", r.message
        assert r.pytorch.error == r.convt.error
        assert r.speedup == pytest.approx(r.pytorch.ms / r.convt.ms)
        assert len(r.pytorch.samples_ms) == len(r.convt.samples_ms) == 3
        assert r.roofline_ms is None and r.convt.roofline_fraction is None  # CPU
        assert r.convt.tflops > 0 and r.convt.gbps > 0
    bwd = [r for r in run.results if r.mode == FWD_BWD]
    assert set(bwd[0].convt.errors) == {"output", "grad_input", "grad_weight", "grad_bias"}
    assert set(bwd[1].convt.errors) == {"output", "grad_input", "grad_weight"}
    summary = {s["mode"]: s for s in run.summary()}
    assert summary["fp32/strict/fwd"]["passed"] == 2


class Described(Wrapped):
    """Torch's ops plus a ``describe_forward`` that reports its arguments."""

    def __init__(self, fail=False):
        super().__init__(lambda d, a, k, op: op(*a, **k))
        self.fail = fail
        self.calls = []

    def describe_forward(self, x, w, b, **kwargs):
        self.calls.append((x.shape, w.shape, b is not None, kwargs))
        if self.fail:
            raise ValueError("no account")
        return f"kernel for {tuple(x.shape)} with TF32 {torch.backends.cudnn.allow_tf32}"


def test_the_implementations_forward_kernel_is_recorded():
    impl = Described()
    run = bench(impl).run([SMALL, SMALL_1D], [FWD, FWD_BWD])
    assert run.ok
    for r in run.results:
        assert r.pytorch.forward_kernel is None
        # Asked under the mode's precision settings (strict: TF32 off).
        assert r.convt.forward_kernel == f"kernel for {tuple(r.case.input_shape)} with TF32 False"
    x_shape, w_shape, has_bias, kwargs = impl.calls[0]
    assert has_bias == SMALL.bias and kwargs == dict(
        stride=SMALL.stride, padding=SMALL.padding, output_padding=SMALL.output_padding,
        groups=SMALL.groups, dilation=SMALL.dilation)
    # torch.nn.functional has no describe_forward: nothing is recorded.
    assert all(r.convt.forward_kernel is None for r in bench(F).run([SMALL], [FWD]).results)
    # A failing account is recorded as such and does not fail the case.
    r = bench(Described(fail=True)).run([SMALL], [FWD]).results[0]
    assert r.ok and r.convt.forward_kernel == "describe_forward failed: ValueError: no account"


def test_both_sides_get_the_same_tensors(monkeypatch):
    seen = {"pytorch": [], "impl": []}
    real = F.conv_transpose2d

    def spy(x, w, b=None, **k):
        if x.dtype != torch.float64:  # not the oracle
            seen["pytorch"].append((x, w, b))
        return real(x, w, b, **k)

    def record(dims, a, k, op):
        seen["impl"].append(a[:3])
        return real(*a, **k)

    monkeypatch.setattr(F, "conv_transpose2d", spy)
    r = bench(Wrapped(record)).run_case(SMALL, FWD)
    assert r.ok, r.message
    # check, warm-up, 3 timed calls, re-check
    assert len(seen["pytorch"]) == len(seen["impl"]) == 6
    for (px, pw, pb), (ix, iw, ib) in zip(seen["pytorch"], seen["impl"]):
        assert px is ix and pw is iw and pb is ib


def test_wrong_results_are_failed_and_not_timed():
    """An implementation off by 1e-2 (relative) is FAILED, never a speedup."""
    def noisy(dims, a, k, op):
        y = op(*a, **k)
        return y + 1e-2 * y.abs().max() * torch.randn_like(y)

    b = bench(Wrapped(noisy))
    run = b.run([SMALL], [FWD])
    (r,) = run.results
    assert r.status == "FAILED" and not run.ok
    assert "output error" in r.message and "above the budget 4.0e-06" in r.message
    assert r.convt.error > r.budget and r.pytorch.error < r.budget
    assert r.speedup is None and r.convt.ms is None and r.pytorch.ms is None


def test_wrong_gradient_is_failed():
    class ScaledGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g * 1.01

    def bad_grad(dims, a, k, op):
        return op(ScaledGrad.apply(a[0]), *a[1:], **k)

    r = bench(Wrapped(bad_grad)).run_case(SMALL, FWD_BWD)
    assert r.status == "FAILED" and "grad_input error" in r.message
    assert r.convt.errors["output"] < 1e-6
    # a gradient may reach the mode's budget or twice PyTorch's error, not more
    assert r.budgets["grad_input"] == max(4e-6, 2 * r.pytorch.errors["grad_input"])


def test_gradient_budget_follows_pytorch():
    """A gradient error a little above PyTorch's own passes; the output budget is fixed."""
    class Nudge(torch.autograd.Function):
        @staticmethod
        def forward(ctx, w):
            return w.clone()

        @staticmethod
        def backward(ctx, g):
            return g * (1 + 2e-6)

    def nudged(dims, a, k, op):
        return op(a[0], Nudge.apply(a[1]), *a[2:], **k)

    r = bench(Wrapped(nudged)).run_case(SMALL, FWD_BWD)
    assert r.status == "ok", r.message
    assert set(r.budgets) == {"output", "grad_input", "grad_weight", "grad_bias"}
    assert r.budgets["output"] == 4e-6
    assert r.convt.errors["grad_weight"] > r.pytorch.errors["grad_weight"]


def test_stale_results_are_caught_by_the_recheck():
    """An implementation that returns its first result again for the same tensors passes
    the first check but not the second, made on new values in the same storage."""
    cache = {}

    def caching(dims, a, k, op):
        key = (a[0].data_ptr(), a[1].data_ptr())
        if key not in cache:
            cache[key] = op(*a, **k).detach()
        return cache[key].clone()

    r = bench(Wrapped(caching)).run_case(SMALL, FWD)
    assert r.status == "FAILED" and r.speedup is None
    assert "above the budget" in r.message


def test_non_finite_output_is_failed():
    def nan_out(dims, a, k, op):
        y = op(*a, **k)
        y.view(-1)[3] = float("nan")
        return y

    r = bench(Wrapped(nan_out)).run_case(SMALL, FWD)
    assert r.status == "FAILED" and "non-finite" in r.message


def test_wrong_dtype_or_shape_is_failed():
    r = bench(Wrapped(lambda d, a, k, op: op(*a, **k).double())).run_case(SMALL, FWD)
    assert r.status == "FAILED" and "torch.float64" in r.message
    r = bench(Wrapped(lambda d, a, k, op: op(*a, **k)[:, :, 1:])).run_case(SMALL, FWD)
    assert r.status == "FAILED" and "shape" in r.message


def test_raising_implementation_is_an_error_and_unsupported_is_reported():
    def boom(dims, a, k, op):
        raise RuntimeError("kernel exploded")

    def unsupported(dims, a, k, op):
        raise NotImplementedError("no bf16 here")

    r = bench(Wrapped(boom)).run_case(SMALL, FWD)
    assert r.status == "ERROR" and "kernel exploded" in r.message
    r = bench(Wrapped(unsupported)).run_case(SMALL, FWD)
    assert r.status == "UNSUPPORTED" and "no bf16 here" in r.message


def test_a_cuda_error_that_leaves_the_device_usable_stops_only_its_case():
    # A rejected launch (say) is reported for its case; the next cases still run.
    def launch_fails_for_2d(dims, a, k, op):
        if dims == 2:
            raise RuntimeError("convt: CUDA error in a launch: invalid argument")
        return op(*a, **k)

    run = bench(Wrapped(launch_fails_for_2d)).run([SMALL, SMALL_1D], [FWD])
    statuses = {r.case.id: r.status for r in run.results}
    assert statuses == {"small": "ERROR", "small1d": "ok"}


def test_run_restores_precision_flag():
    before = torch.backends.cudnn.allow_tf32
    bench(F).run([SMALL], [FWD])
    assert torch.backends.cudnn.allow_tf32 == before


# ---------------------------------------------------------------------------------------
# On a GPU
# ---------------------------------------------------------------------------------------

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@needs_cuda
def test_cuda_run_has_roofline_figures():
    b = Bench(BenchConfig(device="cuda", reps=3, warmup=1), impl=F)
    b.measure_hardware()
    assert b.bandwidth_gbps > 10 and b.peaks is not None
    assert b._flusher is not None and b._flusher.nbytes >= 128 << 20
    before = torch.backends.cudnn.allow_tf32
    modes = b.modes(["fp32", "bf16"], ["default", "strict"], ["fwd", "fwd+bwd"])
    run = b.run([SMALL], modes)
    assert torch.backends.cudnn.allow_tf32 == before
    assert run.ok, [r.message for r in run.results]
    for r in run.results:
        assert r.roofline_ms > 0 and r.bound in ("memory", "compute")
        assert r.peak_tflops == b.peaks.get(r.mode.peak_key)
        assert 0 < r.convt.roofline_fraction == pytest.approx(r.roofline_ms / r.convt.ms)
        assert r.convt.host_ms >= r.convt.ms * 0.5
    assert run.environment["gpu_name"] == torch.cuda.get_device_name()
