"""Autograd: gradcheck and gradgradcheck in float64 (finite differences are the oracle),
double backward against PyTorch's, and gradients computed only when needed.

Both routes to the kernels are checked: the functional API on plain tensors (the eager
route, torch.autograd.Function) and torch.ops.convt.* (the dispatcher route,
torch.library.register_autograd).
"""

from __future__ import annotations

import pytest
import torch

import convt
from convt import _kernels
from conftest import CONVT_FUNCTIONAL, TORCH_FUNCTIONAL, case_id, make_cases, make_tensors, rel_error

# Tiny cases: gradcheck perturbs every element.
SAMPLE = [c for c in make_cases(60, seed=99) if c.batch != 0][:16]


def _functional(case):
    kwargs = case.args()

    def fn(x, w, b=None):
        return CONVT_FUNCTIONAL[case.dims](x, w, b, **kwargs)

    return fn


def _operator(case):
    args = ([*case.stride], [*case.padding], [*case.output_padding], case.groups, [*case.dilation])

    def fn(x, w, b=None):
        unbatched = x.dim() == case.dims + 1
        out = torch.ops.convt.conv_transpose(x.unsqueeze(0) if unbatched else x, w, b, *args)
        return out.squeeze(0) if unbatched else out

    return fn


ROUTES = {"functional": _functional, "operator": _operator}


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("case", SAMPLE, ids=case_id)
def test_gradcheck(case, route):
    x, w, b = make_tensors(case, dtype=torch.float64, seed=5, requires_grad=True)
    inputs = (x, w) if b is None else (x, w, b)
    assert torch.autograd.gradcheck(ROUTES[route](case), inputs)


@pytest.mark.slow
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("case", SAMPLE[:10], ids=case_id)
def test_gradgradcheck(case, route):
    x, w, b = make_tensors(case, dtype=torch.float64, seed=6, requires_grad=True)
    inputs = (x, w) if b is None else (x, w, b)
    assert torch.autograd.gradgradcheck(ROUTES[route](case), inputs)


@pytest.mark.parametrize("case", make_cases(40, seed=31), ids=case_id)
def test_double_backward_matches_pytorch(case):
    """d/d(x, w, grad_out) of <grad of the loss, v>, against PyTorch's double backward."""
    x, w, b = make_tensors(case, dtype=torch.float64, seed=8, requires_grad=True)
    kwargs = case.args()
    results = []
    for fn in (TORCH_FUNCTIONAL[case.dims], CONVT_FUNCTIONAL[case.dims]):
        out = fn(x, w, b, **kwargs)
        g = torch.linspace(-1, 1, out.numel(), dtype=torch.float64).reshape(out.shape).requires_grad_()
        inputs = [x, w] + ([b] if b is not None else [])
        grads = torch.autograd.grad(out, inputs, g, create_graph=True)
        loss = sum((gr * torch.cos(torch.arange(gr.numel(), dtype=torch.float64)).reshape(gr.shape)).sum() for gr in grads)
        results.append(torch.autograd.grad(loss, [x, w, g], allow_unused=True))
    for name, got, want in zip(("input", "weight", "grad_output"), results[1], results[0]):
        if want is None:
            assert got is None or torch.count_nonzero(got) == 0, name
            continue
        assert rel_error(got, want) <= 1e-12, name


def _count_kernel_calls(monkeypatch):
    calls = {"forward": 0, "grad_input": 0, "grad_weight": 0, "grad_bias": 0}
    for name, attr in [("forward", "conv_transpose"), ("grad_input", "grad_input"), ("grad_weight", "grad_weight"), ("grad_bias", "grad_bias")]:
        original = getattr(_kernels, attr)

        def counted(*args, _original=original, _name=name):
            calls[_name] += 1
            return _original(*args)

        monkeypatch.setattr(_kernels, attr, counted)
    return calls


@pytest.mark.parametrize(
    "needs,expected",
    [
        ((True, True, True), {"grad_input": 1, "grad_weight": 1, "grad_bias": 1}),
        ((True, False, False), {"grad_input": 1, "grad_weight": 0, "grad_bias": 0}),
        ((False, True, False), {"grad_input": 0, "grad_weight": 1, "grad_bias": 0}),
        ((False, False, True), {"grad_input": 0, "grad_weight": 0, "grad_bias": 1}),
        ((False, True, True), {"grad_input": 0, "grad_weight": 1, "grad_bias": 1}),
    ],
    ids=["all", "input-only", "weight-only", "bias-only", "parameters-only"],
)
def test_only_needed_gradients_are_computed(monkeypatch, needs, expected):
    calls = _count_kernel_calls(monkeypatch)
    x = torch.randn(2, 3, 4, 4, requires_grad=needs[0])
    w = torch.randn(3, 2, 3, 3, requires_grad=needs[1])
    b = torch.randn(2, requires_grad=needs[2])
    out = convt.conv_transpose2d(x, w, b, stride=2)
    out.sum().backward()
    assert calls["forward"] == 1
    for k, v in expected.items():
        assert calls[k] == v, f"{k}: {calls[k]} calls, expected {v}"


def test_no_autograd_graph_without_grad():
    x, w = torch.randn(1, 2, 3, 3), torch.randn(2, 2, 3, 3, requires_grad=True)
    with torch.no_grad():
        out = convt.conv_transpose2d(x, w)
    assert out.grad_fn is None and not out.requires_grad
    with torch.inference_mode():
        out = convt.conv_transpose2d(x, w)
    assert out.is_inference()


def test_saved_tensors_only_for_needed_gradients():
    """Only the weight is kept alive for grad_input when the weight needs no gradient."""
    x = torch.randn(1, 2, 3, 3, requires_grad=True)
    w = torch.randn(2, 2, 3, 3)
    out = convt.conv_transpose2d(x, w)
    saved = [t for t in out.grad_fn.saved_tensors if t is not None]
    assert len(saved) == 1 and saved[0].shape == w.shape


@pytest.mark.parametrize("route", ["functional", "operator"])
def test_non_contiguous_and_expanded_output_gradients(route):
    """Incoming gradients with any strides (expanded, channels_last, sliced) are read as is."""
    case = make_cases(1, seed=3, dims=(2,))[0]
    x, w, b = make_tensors(case, dtype=torch.float64, seed=2, requires_grad=True)
    fn = ROUTES[route](case)
    ref = TORCH_FUNCTIONAL[2](x, w, b, **case.args())
    out = fn(x, w, b)
    for g in (
        torch.ones(()).expand(ref.shape),
        torch.randn(ref.shape, dtype=torch.float64).transpose(-1, -2).contiguous().transpose(-1, -2),
    ):
        want = torch.autograd.grad(ref, [x, w], g, retain_graph=True)
        got = torch.autograd.grad(out, [x, w], g, retain_graph=True)
        for a, e in zip(got, want):
            assert rel_error(a, e) <= 1e-12
