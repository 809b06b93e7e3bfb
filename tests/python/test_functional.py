"""convt.conv_transpose{1,2,3}d against torch.nn.functional on the CPU: values, output
layout, and all three gradients, over a seeded sweep of tiny problems.

Oracle: PyTorch's own op and autograd in the same dtype. Tolerance (max |out - ref| /
max |ref|): 1e-5 in float32 (two float32 summation orders), 1e-12 in float64.
"""

from __future__ import annotations

import pytest
import torch

from conftest import (
    CONVT_FUNCTIONAL,
    TORCH_FUNCTIONAL,
    case_id,
    make_cases,
    make_tensors,
    record_error,
    rel_error,
)

TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-12}

SWEEP = make_cases(400, seed=20240611)


def _check(case, dtype, seed=0):
    x, w, b = make_tensors(case, dtype=dtype, seed=seed, requires_grad=True)
    kwargs = case.args()
    ref = TORCH_FUNCTIONAL[case.dims](x, w, b, **kwargs)
    out = CONVT_FUNCTIONAL[case.dims](x, w, b, **kwargs)
    tol = TOLERANCE[dtype]

    assert out.shape == ref.shape
    assert out.dtype == ref.dtype
    if out.numel() > 0:
        # The same memory format as PyTorch's result (channels_last in, channels_last out).
        assert out.stride() == ref.stride(), f"strides {out.stride()} != PyTorch's {ref.stride()}"
    mode = f"cpu {str(dtype).replace('torch.', '')} vs torch"
    err = rel_error(out, ref)
    record_error(mode, "forward", err, tol)
    assert err <= tol, f"forward error {err:.3g}"

    grad = torch.rand(ref.shape, generator=torch.Generator().manual_seed(seed + 1), dtype=dtype) * 2 - 1
    inputs = [t for t in (x, w, b) if t is not None]
    ref_grads = torch.autograd.grad(ref, inputs, grad)
    out_grads = torch.autograd.grad(out, inputs, grad)
    for name, got, want in zip(("input", "weight", "bias"), out_grads, ref_grads):
        assert got.shape == want.shape, name
        err = rel_error(got, want)
        record_error(mode, f"grad_{name}", err, tol)
        assert err <= tol, f"grad {name} error {err:.3g}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("case", SWEEP, ids=case_id)
def test_sweep(case, dtype):
    _check(case, dtype)


def test_sweep_covers_the_argument_space():
    """The sweep holds every kind of case the contract names (guards the generator)."""
    cases = SWEEP
    assert len(cases) * 2 >= 500
    assert {c.dims for c in cases} == {1, 2, 3}
    assert any(c.batch is None for c in cases) and any(c.batch == 0 for c in cases)
    assert any(c.groups > 1 and c.in_channels == c.groups for c in cases)  # depthwise
    assert any(any(op >= s and op < d for op, s, d in zip(c.output_padding, c.stride, c.dilation)) for c in cases)
    assert any(len(set(c.kernel_size)) > 1 for c in cases)
    assert {c.layout for c in cases} >= {"contiguous", "channels_last", "weight_channels_last", "strided", "permuted"}
    assert any(c.bias for c in cases) and any(not c.bias for c in cases)
    assert any(max(c.dilation) > 1 for c in cases) and any(max(c.stride) > 1 for c in cases)


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_keyword_and_positional_arguments(dims):
    torch.manual_seed(0)
    x = torch.randn((2, 4) + (4,) * dims)
    w = torch.randn((4, 3) + (3,) * dims)
    b = torch.randn(6)
    ref = TORCH_FUNCTIONAL[dims](x, w, b, 2, 1, 1, 2, 1)
    out = CONVT_FUNCTIONAL[dims](x, w, b, 2, 1, 1, 2, 1)
    assert rel_error(out, ref) <= 1e-5
    out = CONVT_FUNCTIONAL[dims](input=x, weight=w, bias=b, stride=2, padding=1, output_padding=1, groups=2, dilation=1)
    assert rel_error(out, ref) <= 1e-5
    # Per-dimension lists, length-1 lists and integer scalars of other types.
    out = CONVT_FUNCTIONAL[dims](x, w, b, [2] * dims, (1,), [1], torch.tensor(2), (1,) * dims)
    assert rel_error(out, ref) <= 1e-5


def test_integer_like_arguments():
    import numpy as np

    x, w = torch.randn(1, 2, 5, 5), torch.randn(2, 2, 3, 3)
    ref = torch.nn.functional.conv_transpose2d(x, w, None, 2, (1, 0))
    out = CONVT_FUNCTIONAL[2](x, w, None, np.int64(2), (torch.tensor(1), np.int32(0)))
    assert rel_error(out, ref) <= 1e-5


def test_zero_output_channels():
    """C_out = 0 gives an empty output of the right shape (PyTorch's meta kernel's answer;
    its CPU kernels reject an empty weight), and zero input gradients."""
    x = torch.randn(2, 3, 4, 4, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, 0, 3, 3, dtype=torch.float64, requires_grad=True)
    out = CONVT_FUNCTIONAL[2](x, w, stride=2)
    ref = TORCH_FUNCTIONAL[2](x.to("meta"), w.to("meta"), stride=2)
    assert out.shape == ref.shape == (2, 0, 9, 9)
    gx, gw = torch.autograd.grad(out.sum(), (x, w))
    assert torch.equal(gx, torch.zeros_like(x)) and gw.shape == w.shape


def test_batch_zero_gradients_are_zero():
    x = torch.randn(0, 3, 4, 4, requires_grad=True)
    w = torch.randn(3, 2, 3, 3, requires_grad=True)
    b = torch.randn(2, requires_grad=True)
    out = CONVT_FUNCTIONAL[2](x, w, b, stride=2)
    assert out.shape == (0, 2, 9, 9)
    gx, gw, gb = torch.autograd.grad(out.sum(), (x, w, b))
    assert gx.shape == x.shape
    assert torch.equal(gw, torch.zeros_like(w)) and torch.equal(gb, torch.zeros_like(b))


def test_expanded_and_overlapping_inputs():
    """Inputs with stride-0 dimensions (expand) are read in place, not copied."""
    x = torch.randn(1, 3, 1, 5).expand(2, 3, 4, 5)
    w = torch.randn(3, 1, 1, 1).expand(3, 2, 2, 3)
    b = torch.randn(1).expand(2)
    ref = TORCH_FUNCTIONAL[2](x.contiguous(), w.contiguous(), b.contiguous(), 2, 1)
    out = CONVT_FUNCTIONAL[2](x, w, b, 2, 1)
    assert rel_error(out, ref) <= 1e-5


def test_output_does_not_alias_inputs_and_inputs_are_unchanged():
    x, w, b = torch.randn(2, 3, 4, 4), torch.randn(3, 2, 3, 3), torch.randn(2)
    copies = [t.clone() for t in (x, w, b)]
    out = CONVT_FUNCTIONAL[2](x, w, b, 2)
    for t, c in zip((x, w, b), copies):
        assert torch.equal(t, c)
        assert out.untyped_storage().data_ptr() != t.untyped_storage().data_ptr()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_half_precision_on_cpu(dtype):
    """float16/bfloat16 on the CPU: accumulated in float32, so within the CUDA budgets
    against the float64 result of the same (rounded) inputs."""
    budget = {torch.float16: 1.5e-3, torch.bfloat16: 1e-2}[dtype]
    for case in make_cases(24, seed=7):
        x, w, b = make_tensors(case, dtype=dtype, seed=3)
        out = CONVT_FUNCTIONAL[case.dims](x, w, b, **case.args())
        assert out.dtype == dtype
        oracle = TORCH_FUNCTIONAL[case.dims](
            x.double(), w.double(), None if b is None else b.double(), **case.args()
        )
        assert rel_error(out, oracle) <= budget, str(case)
