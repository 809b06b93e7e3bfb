"""convt's PyTorch operators: ``torch.ops.convt.*``.

Four operators, each with a CPU and a CUDA kernel (``_kernels.py``), a fake (meta)
kernel for torch.compile, FakeTensor and meta tensors, and autograd (registered in
``_dispatch.py``, where the derivatives live):

``convt::conv_transpose(input, weight, bias?, stride, padding, output_padding, groups, dilation)``
    y = conv_transpose(input, weight) + bias, batched input (rank spatial_dims + 2);
    exactly ``torch.nn.functional.conv_transpose{1,2,3}d``.
``convt::conv_transpose_grad_input(grad_output, weight, input_size, <same arguments>)``
    the gradient with respect to the input: a direct convolution of grad_output.
``convt::conv_transpose_grad_weight(input, grad_output, weight_size, <same arguments>)``
    the gradient with respect to the weight.
``convt::conv_transpose_grad_bias(grad_output)``
    the gradient with respect to the bias: grad_output summed over all but dimension 1.

The three gradient ops are themselves differentiable (their derivatives are again these
ops), so double backward works. ``convt::conv_transpose`` also follows autocast as
PyTorch's transposed convolutions do (cast to the autocast dtype on CUDA and on the CPU).

Users normally call ``convt.conv_transpose2d`` & co., which take the fastest route to
these kernels; the ops are what torch.compile, torch.export and tensor subclasses see.
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch

from . import _C, _kernels

__all__ = [
    "conv_transpose",
    "conv_transpose_grad_input",
    "conv_transpose_grad_weight",
    "conv_transpose_grad_bias",
    "LIBRARY",
]

LIBRARY = torch.library.Library("convt", "DEF")

_ARGS = "SymInt[] stride, SymInt[] padding, SymInt[] output_padding, SymInt groups, SymInt[] dilation"
LIBRARY.define(f"conv_transpose(Tensor input, Tensor weight, Tensor? bias, {_ARGS}) -> Tensor")
LIBRARY.define(
    f"conv_transpose_grad_input(Tensor grad_output, Tensor weight, SymInt[] input_size, {_ARGS}) -> Tensor"
)
LIBRARY.define(
    f"conv_transpose_grad_weight(Tensor input, Tensor grad_output, SymInt[] weight_size, {_ARGS}) -> Tensor"
)
LIBRARY.define("conv_transpose_grad_bias(Tensor grad_output) -> Tensor")

conv_transpose = torch.ops.convt.conv_transpose.default
conv_transpose_grad_input = torch.ops.convt.conv_transpose_grad_input.default
conv_transpose_grad_weight = torch.ops.convt.conv_transpose_grad_weight.default
conv_transpose_grad_bias = torch.ops.convt.conv_transpose_grad_bias.default

# ---------------------------------------------------------------------------------------
# Device kernels
# ---------------------------------------------------------------------------------------
for _key in ("CPU", "CUDA"):
    LIBRARY.impl("conv_transpose", _kernels.conv_transpose, _key)
    LIBRARY.impl("conv_transpose_grad_input", _kernels.grad_input, _key)
    LIBRARY.impl("conv_transpose_grad_weight", _kernels.grad_weight, _key)
    LIBRARY.impl("conv_transpose_grad_bias", _kernels.grad_bias, _key)

# ---------------------------------------------------------------------------------------
# Fake kernels: output metadata without data
# ---------------------------------------------------------------------------------------


def _is_static(*values) -> bool:
    """Whether every size/argument is a plain int (no symbolic sizes)."""
    for v in values:
        if isinstance(v, (tuple, list, torch.Size)):
            for e in v:
                if type(e) is not int:
                    return False
        elif type(v) is not int:
            return False
    return True


def _strides_like_channels_last(t: torch.Tensor) -> bool:
    """c10's is_channels_last_strides_{2d,3d} (what Tensor.suggest_memory_format() uses).

    The same rule as ``strides_like_channels_last`` in python/csrc/convt_ext.cpp, which
    serves real and static-shape calls; this copy serves symbolic shapes.
    """
    nd = t.dim()
    if nd not in (4, 5):
        return False
    sizes, strides = t.shape, t.stride()
    if strides[1] == 0:
        return False
    minimum = 0
    for d in (1, 3, 2, 0) if nd == 4 else (1, 4, 3, 2, 0):
        if sizes[d] == 0 or strides[d] < minimum:
            return False
        if d == 0 and minimum == strides[1]:
            return False
        minimum = strides[d] * sizes[d] if sizes[d] > 1 else strides[d]
    return True


def _channels_last_candidate(a: torch.Tensor, b: torch.Tensor, spatial_dims: int) -> bool:
    """``channels_last_candidate`` of python/csrc/convt_ext.cpp, for symbolic shapes."""
    return spatial_dims > 1 and (_strides_like_channels_last(a) or _strides_like_channels_last(b))


def _fake_empty(shape: Sequence, channels_last: bool, like: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    """The output of a fake kernel: on the meta device when an operand is a meta tensor
    (as PyTorch's own ops answer such a call), else on the operands' (fake) device."""
    fmt = torch.contiguous_format
    if channels_last:
        fmt = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
    device = "meta" if like.is_meta or other.is_meta else like.device
    return torch.empty(shape, dtype=like.dtype, device=device, memory_format=fmt)


def _fake_prepare(prepare, op_name: str, tensors: Sequence[Optional[torch.Tensor]], *args, roles=("weight", "bias")):
    """Run a C++ ``prepare_*`` on shape-only descriptors: the real call's validation,
    output shape and layout candidate (call, shape, candidate), with no data touched."""
    try:
        descs = [None if t is None else _kernels.describe(t, with_data=False) for t in tensors]
    except KeyError:
        raise _kernels.unsupported_dtype_error(op_name, tensors, roles) from None
    return prepare(*descs, *args, 0, 0, False)[:3]


def _op_name(spatial_dims) -> str:
    return f"conv_transpose{spatial_dims}d"


@torch.library.register_fake("convt::conv_transpose", lib=LIBRARY)
def _conv_transpose_fake(x, w, b, stride, padding, output_padding, groups, dilation):
    sd = len(stride)
    args = (stride, padding, output_padding, groups, dilation)
    if _is_static(x.shape, x.stride(), w.shape, w.stride(), *args) and (b is None or _is_static(b.shape)):
        params = (sd, stride, padding, output_padding, dilation, groups)
        _, shape, candidate = _fake_prepare(_C.prepare_forward, _op_name(sd), (x, w, b), params)
    else:
        shape = [x.shape[0], w.shape[1] * groups]
        for d in range(sd):
            shape.append(
                (x.shape[2 + d] - 1) * stride[d]
                - 2 * padding[d]
                + dilation[d] * (w.shape[2 + d] - 1)
                + output_padding[d]
                + 1
            )
        candidate = _channels_last_candidate(x, w, sd)
    cl = candidate and _kernels.pytorch_channels_last(x, w, b, *args)
    return _fake_empty(shape, cl, x, w)


@torch.library.register_fake("convt::conv_transpose_grad_input", lib=LIBRARY)
def _grad_input_fake(dy, w, input_size, stride, padding, output_padding, groups, dilation):
    sd = len(stride)
    args = (stride, padding, output_padding, groups, dilation)
    if _is_static(dy.shape, dy.stride(), w.shape, w.stride(), input_size, *args):
        params = (sd, stride, padding, output_padding, dilation, groups)
        _, shape, candidate = _fake_prepare(_C.prepare_grad_input, _op_name(sd), (dy, w), input_size, params)
    else:
        shape, candidate = list(input_size), _channels_last_candidate(dy, w, sd)
    return _fake_empty(shape, candidate and _kernels.cudnn_channels_last(dy), dy, w)


@torch.library.register_fake("convt::conv_transpose_grad_weight", lib=LIBRARY)
def _grad_weight_fake(x, dy, weight_size, stride, padding, output_padding, groups, dilation):
    sd = len(stride)
    args = (stride, padding, output_padding, groups, dilation)
    if _is_static(x.shape, x.stride(), dy.shape, dy.stride(), weight_size, *args):
        params = (sd, stride, padding, output_padding, dilation, groups)
        _, shape, candidate = _fake_prepare(
            _C.prepare_grad_weight, _op_name(sd), (x, dy), weight_size, params, roles=("grad_output",)
        )
    else:
        shape, candidate = list(weight_size), _channels_last_candidate(x, dy, sd)
    return _fake_empty(shape, candidate and _kernels.cudnn_channels_last(x), x, dy)


@torch.library.register_fake("convt::conv_transpose_grad_bias", lib=LIBRARY)
def _grad_bias_fake(dy):
    if _is_static(dy.shape, dy.stride()):
        _fake_prepare(_C.prepare_grad_bias, _op_name(max(dy.dim() - 2, 1)), (dy,))
    return dy.new_empty((dy.shape[1],))


# ---------------------------------------------------------------------------------------
# Autocast: like PyTorch's transposed convolutions, run in the autocast dtype
# ---------------------------------------------------------------------------------------


def _autocast_kernel(device_type: str, key: "torch._C.DispatchKey"):
    if hasattr(torch, "get_autocast_dtype"):

        def autocast_dtype() -> torch.dtype:
            return torch.get_autocast_dtype(device_type)

    else:  # torch < 2.4 spelling
        autocast_dtype = torch.get_autocast_gpu_dtype if device_type == "cuda" else torch.get_autocast_cpu_dtype

    def cast(t: Optional[torch.Tensor], dtype: torch.dtype) -> Optional[torch.Tensor]:
        # Autocast's rule: floating-point tensors of this device type, except float64.
        if t is None or not t.is_floating_point() or t.dtype is torch.float64 or t.device.type != device_type:
            return t
        return t.to(dtype)

    def kernel(x, w, b, stride, padding, output_padding, groups, dilation):
        dtype = autocast_dtype()
        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(key)):
            return conv_transpose(
                cast(x, dtype), cast(w, dtype), cast(b, dtype), stride, padding, output_padding, groups, dilation
            )

    return kernel


LIBRARY.impl("conv_transpose", _autocast_kernel("cuda", torch._C.DispatchKey.AutocastCUDA), "AutocastCUDA")
LIBRARY.impl("conv_transpose", _autocast_kernel("cpu", torch._C.DispatchKey.AutocastCPU), "AutocastCPU")
