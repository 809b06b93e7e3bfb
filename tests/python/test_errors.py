"""Bad arguments: convt raises what PyTorch raises (the same exception type), with a
message that names the offending value, before any kernel runs — and never crashes.

Each case makes the same call to torch.nn.functional and to convt. Where PyTorch's CPU
kernels raise a backend-internal message (oneDNN's "could not create a primitive
descriptor"), convt's message is PyTorch's general wording for the rule instead.
"""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F

import convt

X = torch.randn(2, 4, 5, 5)
W = torch.randn(4, 3, 3, 3)
B = torch.randn(3)


def _call(fn, dims, args, kwargs):
    return fn(*args, **kwargs)


# (id, spatial dims, args, kwargs, regex convt's message must match)
BAD_CALLS = [
    ("stride-zero", 2, (X, W, B, 0), {}, r"non-positive stride is not supported"),
    ("stride-negative", 2, (X, W, B, (1, -1)), {}, r"non-positive stride is not supported"),
    ("padding-negative", 2, (X, W, B, 1, -1), {}, r"negative padding is not supported"),
    ("output-padding-negative", 2, (X, W, B, 1, 0, -1), {}, r"negative output_padding is not supported"),
    (
        "output-padding-not-below-stride-or-dilation",
        2,
        (X, W, B, 1, 0, 1),
        {},
        r"output padding must be smaller than either stride or dilation, but got "
        r"output_padding_height: 1 output_padding_width: 1 stride_height: 1",
    ),
    (
        "output-padding-one-dimension",
        2,
        (X, W, B, 2, 0, (0, 2)),
        {},
        r"output padding must be smaller than either stride or dilation.*output_padding_width: 2",
    ),
    (
        "output-padding-1d",
        1,
        (torch.randn(1, 4, 5), torch.randn(4, 2, 3), None, 1, 0, 3, 1, 2),
        {},
        r"output padding must be smaller than either stride or dilation.*output_padding_width: 3",
    ),
    (
        "output-padding-3d",
        3,
        (torch.randn(1, 4, 3, 3, 3), torch.randn(4, 2, 2, 2, 2), None, 1, 0, (0, 0, 3), 1, 2),
        {},
        r"output padding must be smaller than either stride or dilation, but got "
        r"output_padding_depth: 0 output_padding_height: 0 output_padding_width: 3",
    ),
    ("groups-zero", 2, (X, W, B, 1, 0, 0, 0), {}, r"non-positive groups is not supported"),
    ("groups-negative", 2, (X, W, B), {"groups": -2}, r"non-positive groups is not supported"),
    (
        "groups-not-dividing-weight",
        2,
        (X, W, B),
        {"groups": 3},
        r"Given groups=3, expected weight to be divisible by 3 at dimension 0, but got weight of size \[4, 3, 3, 3\]",
    ),
    (
        "groups-above-channels",
        2,
        (X, W, B),
        {"groups": 8},
        r"Given groups=8, expected weight to be at least 8 at dimension 0, but got weight of size \[4, 3, 3, 3\]",
    ),
    ("dilation-zero", 2, (X, W, B), {"dilation": 0}, r"dilation should be greater than zero, but got dilation=\[0, 0\]"),
    ("dilation-negative", 2, (X, W, B), {"dilation": (1, -1)}, r"dilation should be greater than zero"),
    (
        "kernel-zero",
        2,
        (X, torch.randn(4, 3, 0, 3), None),
        {},
        r"non-positive kernel size is not supported, but got kernel_size=\[0, 3\]",
    ),
    (
        "bias-wrong-length",
        2,
        (X, W, torch.randn(4)),
        {},
        r"expected bias to be 1-dimensional with 3 elements, but got bias of size \[4\] instead",
    ),
    (
        "bias-2d",
        2,
        (X, W, torch.randn(3, 1)),
        {},
        r"expected bias to be 1-dimensional with 3 elements, but got bias of size \[3, 1\] instead",
    ),
    ("bias-dtype", 2, (X, W, B.double()), {}, r"Input type \(float32\) and bias type \(float64\) should be the same"),
    ("weight-dtype", 2, (X, W.double(), B), {}, r"Input type \(float32\) and weight type \(float64\) should be the same"),
    ("input-dtype", 2, (X.double(), W, B), {}, r"Input type \(float64\) and weight type \(float32\) should be the same"),
    (
        "mixed-integer-dtype",
        2,
        (X.long(), W, B),
        {},
        r"Input type \(int64\) and weight type \(float32\) should be the same",
    ),
    (
        "input-rank-low",
        2,
        (torch.randn(5, 5), W),
        {},
        r"^Expected 3D \(unbatched\) or 4D \(batched\) input to conv_transpose2d, but got input of size: \[5, 5\]$",
    ),
    (
        "input-rank-high",
        2,
        (torch.randn(1, 1, 4, 5, 5), W),
        {},
        r"Expected 3D \(unbatched\) or 4D \(batched\) input to conv_transpose2d, but got input of size: \[1, 1, 4, 5, 5\]",
    ),
    (
        "input-rank-1d",
        1,
        (torch.randn(3), torch.randn(3, 2, 2)),
        {},
        r"Expected 2D \(unbatched\) or 3D \(batched\) input to conv_transpose1d, but got input of size: \[3\]",
    ),
    ("weight-rank-low", 2, (X, torch.randn(4, 3, 3)), {}, r"weight of size:? \[4, 3, 3\]"),
    ("weight-rank-high", 2, (X, torch.randn(4, 3, 3, 3, 3)), {}, r"weight of size:? \[4, 3, 3, 3, 3\]"),
    (
        "channels-mismatch",
        2,
        (X, torch.randn(5, 3, 3, 3)),
        {},
        r"Given transposed=1, weight of size \[5, 3, 3, 3\], expected input\[2, 4, 5, 5\] to have 5 channels, "
        r"but got 4 channels instead",
    ),
    (
        "channels-mismatch-unbatched",
        2,
        (X[0], torch.randn(5, 3, 3, 3)),
        {},
        r"expected input\[1, 4, 5, 5\] to have 5 channels, but got 4 channels instead",
    ),
    (
        "output-too-small",
        2,
        (X, W),
        {"padding": (0, 4)},
        r"Given input size per channel: \(5 x 5\)\. Calculated output size per channel: \(7 x -1\)\. "
        r"Output size is too small",
    ),
    (
        "empty-spatial-input",
        2,
        (torch.randn(2, 4, 0, 5), W, B),
        {},
        r"Only zero batch or zero channel inputs are supported, but got input shape: \[2, 4, 0, 5\]",
    ),
    ("weight-zero-in-channels", 2, (torch.randn(2, 0, 5, 5), torch.randn(0, 3, 3, 3)), {}, r"expected weight to be at least 1"),
    # Wrong argument types: PyTorch's argument parser's TypeError and wording.
    ("stride-float", 2, (X, W, B, 1.5), {}, r"argument 'stride' \(position 4\) must be tuple of ints, not float"),
    (
        "stride-float-element",
        2,
        (X, W, B, (1.5, 1)),
        {},
        r"argument 'stride' \(position 4\) must be tuple of ints, but found element of type float at pos 0",
    ),
    ("stride-str", 2, (X, W, B, "a"), {}, r"argument 'stride' \(position 4\) must be tuple of ints, not str"),
    ("stride-none", 2, (X, W, B, None), {}, r"must be tuple of ints, not NoneType"),
    ("stride-bool", 2, (X, W, B, True), {}, r"must be tuple of ints, not bool"),
    ("stride-bool-element", 2, (X, W, B, (True, 1)), {}, r"found element of type bool at pos 0"),
    ("padding-same", 2, (X, W, B, 1, "same"), {}, r"argument 'padding' \(position 5\) must be tuple of ints, not str"),
    ("groups-float", 2, (X, W, B, 1, 0, 0, 1.0), {}, r"argument 'groups' \(position 7\) must be int, not float"),
    ("groups-none", 2, (X, W, B), {"groups": None}, r"argument 'groups' \(position 7\) must be int, not NoneType"),
    ("dilation-list-of-str", 2, (X, W, B), {"dilation": ["a", 1]}, r"argument 'dilation' \(position 8\)"),
    ("input-none", 2, (None, W), {}, r"argument 'input' \(position 1\) must be Tensor, not NoneType"),
    ("weight-none", 2, (X, None), {}, r"argument 'weight' \(position 2\) must be Tensor, not NoneType"),
    ("bias-list", 2, (X, W, [1.0, 2.0, 3.0]), {}, r"argument 'bias' \(position 3\) must be Tensor, not list"),
    # Per-dimension arguments of the wrong length.
    (
        "stride-length",
        2,
        (X, W, B, (1, 1, 1)),
        {},
        r"^expected stride to be a single integer value or a list of 2 values to match the convolution "
        r"dimensions, but got stride=\[1, 1, 1\]$",
    ),
    ("stride-empty", 2, (X, W, B, []), {}, r"expected stride to be a single integer value .* but got stride=\[\]"),
    ("padding-length", 3, (torch.randn(1, 2, 3, 3, 3), torch.randn(2, 2, 2, 2, 2)), {"padding": (1, 1)}, r"padding=\[1, 1\]"),
    ("dilation-length", 1, (torch.randn(1, 2, 3), torch.randn(2, 2, 2)), {"dilation": (1, 1)}, r"dilation=\[1, 1\]"),
]

FUNCTIONS = {
    "torch": {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d},
    "convt": {1: convt.conv_transpose1d, 2: convt.conv_transpose2d, 3: convt.conv_transpose3d},
}


@pytest.mark.parametrize("name,dims,args,kwargs,pattern", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_arguments_raise_pytorchs_error(name, dims, args, kwargs, pattern):
    with pytest.raises(Exception) as torch_error:
        FUNCTIONS["torch"][dims](*args, **kwargs)
    with pytest.raises(type(torch_error.value), match=pattern) as convt_error:
        FUNCTIONS["convt"][dims](*args, **kwargs)
    # Exactly PyTorch's type, not merely a subclass or superclass of it.
    assert type(convt_error.value) is type(torch_error.value), (
        f"PyTorch raised {type(torch_error.value).__name__}: {torch_error.value}; "
        f"convt raised {type(convt_error.value).__name__}: {convt_error.value}"
    )


@pytest.mark.parametrize(
    "dtype,scalar_name",
    [(torch.int64, "Long"), (torch.int32, "Int"), (torch.bool, "Bool"), (torch.complex64, "ComplexFloat"), (torch.uint8, "Byte")],
)
@pytest.mark.parametrize("dims", [1, 2, 3])
def test_unsupported_dtypes(dims, dtype, scalar_name):
    """Integer, boolean and complex tensors: NotImplementedError, a RuntimeError, worded as
    PyTorch's CUDA kernels word it (PyTorch's CPU kernels accept some of these dtypes)."""
    x = torch.ones((1, 2) + (3,) * dims, dtype=dtype)
    w = torch.ones((2, 2) + (2,) * dims, dtype=dtype)
    name = f"conv_transpose{dims}d"
    with pytest.raises(NotImplementedError, match=f"^\"{name}\" not implemented for '{scalar_name}'$"):
        FUNCTIONS["convt"][dims](x, w)
    assert issubclass(NotImplementedError, RuntimeError)


def test_unsupported_dtype_through_the_operator():
    x, w = torch.ones(1, 2, 3, 3, dtype=torch.int64), torch.ones(2, 2, 2, 2, dtype=torch.int64)
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        torch.ops.convt.conv_transpose(x, w, None, [1, 1], [0, 0], [0, 0], 1, [1, 1])


def test_errors_leave_no_state_behind():
    """After a failing call, a good call still works (nothing half-done in between)."""
    for _, dims, args, kwargs, _ in BAD_CALLS[:10]:
        with pytest.raises(Exception):
            FUNCTIONS["convt"][dims](*args, **kwargs)
    out = convt.conv_transpose2d(X, W, B, 2)
    assert torch.allclose(out, F.conv_transpose2d(X, W, B, 2), atol=1e-5)


def test_errors_through_the_operator_and_compile_path():
    """torch.ops.convt.* and the fake kernels apply the same rules as the functional API."""
    op = torch.ops.convt.conv_transpose
    with pytest.raises(RuntimeError, match=re.escape("non-positive stride is not supported")):
        op(X, W, B, [0, 1], [0, 0], [0, 0], 1, [1, 1])
    with pytest.raises(RuntimeError, match="expected weight to be divisible by 3"):
        op(X.to("meta"), W.to("meta"), None, [1, 1], [0, 0], [0, 0], 3, [1, 1])
    with pytest.raises(RuntimeError, match="Output size is too small"):
        op(X.to("meta"), W.to("meta"), None, [1, 1], [4, 4], [0, 0], 1, [1, 1])
    with pytest.raises(RuntimeError, match="expected grad_output of size"):
        torch.ops.convt.conv_transpose_grad_input(
            torch.randn(2, 3, 6, 6), W, [2, 4, 5, 5], [1, 1], [0, 0], [0, 0], 1, [1, 1]
        )
    with pytest.raises(RuntimeError, match="expected grad_output of size"):
        torch.ops.convt.conv_transpose_grad_weight(
            X, torch.randn(2, 3, 6, 6), [4, 3, 3, 3], [1, 1], [0, 0], [0, 0], 1, [1, 1]
        )


def test_module_errors_match_pytorch():
    """Module constructor and forward errors are PyTorch's own (the modules subclass it)."""
    for kwargs in [dict(groups=3), dict(groups=0), dict(padding_mode="reflect")]:
        with pytest.raises(Exception) as torch_error:
            torch.nn.ConvTranspose2d(4, 6, 3, **kwargs)
        with pytest.raises(type(torch_error.value)):
            convt.nn.ConvTranspose2d(4, 6, 3, **kwargs)
    # padding="same" is accepted by the constructor and fails in forward, in both.
    with pytest.raises(Exception) as torch_error:
        torch.nn.ConvTranspose2d(4, 3, 3, padding="same")(X)
    with pytest.raises(type(torch_error.value), match="argument 'padding'"):
        convt.nn.ConvTranspose2d(4, 3, 3, padding="same")(X)
    m = convt.nn.ConvTranspose2d(4, 3, 3, stride=2)
    with pytest.raises(ValueError, match=r"requested an output size of \[20, 20\]"):
        m(X, output_size=[20, 20])
    with pytest.raises(ValueError, match="output_size must have 2 or 4 elements"):
        m(X, output_size=[11])
