"""Drop-in replacements for ``torch.nn.functional.conv_transpose{1,2,3}d``.

Same signatures, same results, same output shapes and memory formats, same errors (type
and wording) for bad arguments, raised before any kernel runs. Unbatched inputs (rank
spatial_dims + 1) are accepted as PyTorch accepts them. Autograd, torch.compile,
autocast and CUDA graphs work; see ``_dispatch.py`` for how a call reaches its kernel.
"""

from __future__ import annotations

import operator
from typing import Optional, Union

import torch
from torch import Tensor

from . import _C, _dispatch, _kernels

__all__ = ["conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "describe_forward"]

IntOrTuple = Union[int, tuple, list]


def _type_name(v) -> str:
    return type(v).__name__


def _to_int(value, arg: str, pos: int, name: str):
    """An int argument (groups): ints, SymInts and integer scalars (numpy, 0-dim tensors)."""
    if type(value) is int:
        return value
    if isinstance(value, torch.SymInt):
        return value
    if not isinstance(value, bool):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise TypeError(f"{name}(): argument '{arg}' (position {pos}) must be int, not {_type_name(value)}")


def _expand_slow(value, n: int, arg: str, pos: int, name: str) -> tuple:
    if isinstance(value, (tuple, list)):
        items = []
        for i, e in enumerate(value):
            if type(e) is int or isinstance(e, torch.SymInt):
                items.append(e)
                continue
            if not isinstance(e, bool):
                try:
                    items.append(operator.index(e))
                    continue
                except TypeError:
                    pass
            raise TypeError(
                f"{name}(): argument '{arg}' (position {pos}) must be tuple of ints, "
                f"but found element of type {_type_name(e)} at pos {i}"
            )
    elif isinstance(value, torch.SymInt):
        items = [value]
    elif isinstance(value, bool):
        items = None
    else:
        try:
            items = [operator.index(value)]
        except TypeError:
            items = None
    if items is None:
        raise TypeError(f"{name}(): argument '{arg}' (position {pos}) must be tuple of ints, not {_type_name(value)}")
    if len(items) == 1:
        return tuple(items) * n
    if len(items) != n:
        raise RuntimeError(
            f"expected {arg} to be a single integer value or a list of {n} values to match the "
            f"convolution dimensions, but got {arg}={items}"
        )
    return tuple(items)


def _expand(value, n: int, arg: str, pos: int, name: str) -> tuple:
    """A per-dimension argument as a tuple of n ints, the way PyTorch's argument parser
    and ``expand_param_if_needed`` read it (an int or a sequence of 1 or n ints)."""
    if type(value) is int:
        return (value,) * n
    if (type(value) is tuple or type(value) is list) and len(value) == n:
        for e in value:
            if type(e) is not int:
                break
        else:
            return tuple(value)
    return _expand_slow(value, n, arg, pos, name)


def _check_tensor(value, arg: str, pos: int, name: str) -> None:
    if not isinstance(value, Tensor):
        raise TypeError(f"{name}(): argument '{arg}' (position {pos}) must be Tensor, not {_type_name(value)}")


def _checked_args(sd, name, input, weight, bias, stride, padding, output_padding, groups, dilation):
    """The arguments type-checked as PyTorch checks them, per-dimension ones as sd-tuples:
    (stride, padding, output_padding, groups, dilation)."""
    _check_tensor(input, "input", 1, name)
    _check_tensor(weight, "weight", 2, name)
    if bias is not None:
        _check_tensor(bias, "bias", 3, name)
    stride = _expand(stride, sd, "stride", 4, name)
    padding = _expand(padding, sd, "padding", 5, name)
    output_padding = _expand(output_padding, sd, "output_padding", 6, name)
    if type(groups) is not int:
        groups = _to_int(groups, "groups", 7, name)
    dilation = _expand(dilation, sd, "dilation", 8, name)
    return stride, padding, output_padding, groups, dilation


def _conv_transpose(sd, name, input, weight, bias, stride, padding, output_padding, groups, dilation) -> Tensor:
    stride, padding, output_padding, groups, dilation = _checked_args(
        sd, name, input, weight, bias, stride, padding, output_padding, groups, dilation)
    nd = input.dim()
    if nd == sd + 2:
        return _dispatch.conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation)
    if nd == sd + 1:
        out = _dispatch.conv_transpose(
            input.unsqueeze(0), weight, bias, stride, padding, output_padding, groups, dilation
        )
        return out.squeeze(0)
    raise RuntimeError(
        f"Expected {sd + 1}D (unbatched) or {sd + 2}D (batched) input to {name}, "
        f"but got input of size: {list(input.shape)}"
    )


def conv_transpose1d(
    input: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    stride: IntOrTuple = 1,
    padding: IntOrTuple = 0,
    output_padding: IntOrTuple = 0,
    groups: int = 1,
    dilation: IntOrTuple = 1,
) -> Tensor:
    """Transposed 1-D convolution: ``torch.nn.functional.conv_transpose1d``, computed by convt.

    input ``(N, C_in, L)`` or ``(C_in, L)``; weight ``(C_in, C_out/groups, k)``; bias
    ``(C_out,)`` or None. Output length ``(L-1)*stride - 2*padding + dilation*(k-1) +
    output_padding + 1``.
    """
    return _conv_transpose(1, "conv_transpose1d", input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose2d(
    input: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    stride: IntOrTuple = 1,
    padding: IntOrTuple = 0,
    output_padding: IntOrTuple = 0,
    groups: int = 1,
    dilation: IntOrTuple = 1,
) -> Tensor:
    """Transposed 2-D convolution: ``torch.nn.functional.conv_transpose2d``, computed by convt.

    input ``(N, C_in, H, W)`` or ``(C_in, H, W)``; weight ``(C_in, C_out/groups, kH, kW)``;
    bias ``(C_out,)`` or None. stride, padding, output_padding and dilation: an int or a
    pair. A channels_last input or weight gives a channels_last output, as in PyTorch.
    """
    return _conv_transpose(2, "conv_transpose2d", input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose3d(
    input: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    stride: IntOrTuple = 1,
    padding: IntOrTuple = 0,
    output_padding: IntOrTuple = 0,
    groups: int = 1,
    dilation: IntOrTuple = 1,
) -> Tensor:
    """Transposed 3-D convolution: ``torch.nn.functional.conv_transpose3d``, computed by convt.

    input ``(N, C_in, D, H, W)`` or ``(C_in, D, H, W)``; weight
    ``(C_in, C_out/groups, kD, kH, kW)``; bias ``(C_out,)`` or None. stride, padding,
    output_padding and dilation: an int or a triple.
    """
    return _conv_transpose(3, "conv_transpose3d", input, weight, bias, stride, padding, output_padding, groups, dilation)


def describe_forward(
    input: Tensor,
    weight: Tensor,
    bias: Optional[Tensor] = None,
    stride: IntOrTuple = 1,
    padding: IntOrTuple = 0,
    output_padding: IntOrTuple = 0,
    groups: int = 1,
    dilation: IntOrTuple = 1,
) -> str:
    """What ``conv_transpose{1,2,3}d`` with these arguments runs, as one line: the kernel
    convt's dispatcher picks (on CUDA, with the float32 precision PyTorch's settings allow
    right now) and, where it falls back, why; what ``CONVT_LOG=1`` prints per call.
    Nothing is launched. The spatial rank comes from ``weight``; arguments are checked
    as ``conv_transpose{1,2,3}d`` checks them.
    """
    _check_tensor(weight, "weight", 2, "describe_forward")
    sd = weight.dim() - 2
    if sd not in (1, 2, 3):
        raise RuntimeError(f"describe_forward: expected a weight of rank 3, 4 or 5, "
                           f"but got size {list(weight.shape)}")
    stride, padding, output_padding, groups, dilation = _checked_args(
        sd, f"conv_transpose{sd}d", input, weight, bias, stride, padding, output_padding, groups,
        dilation)
    x = input.unsqueeze(0) if input.dim() == sd + 1 else input
    math, _ = _kernels._exec_args(x)
    params = (sd, stride, padding, output_padding, dilation, groups)
    descs = (_kernels.describe(x), _kernels.describe(weight),
             None if bias is None else _kernels.describe(bias))
    return str(_C.describe_forward(*descs, params, math))
