"""Routing and autograd for convt's four ops.

Every convt call reaches a kernel by one of two routes:

* the **dispatcher route**, ``torch.ops.convt.*`` (``ops.py``): everything PyTorch offers
  around an operator — torch.compile and torch.export (fake kernels), tensor subclasses,
  ``__torch_function__`` and ``__torch_dispatch__`` modes, autocast — at a host cost of
  tens of microseconds per call. (torch.func transforms are routed here too, but
  PyTorch's autograd for custom operators does not support them.)
* the **eager route**: plain ``torch.Tensor``/``nn.Parameter`` arguments on the CPU or a
  CUDA device with none of the above active go straight to the kernels (``_kernels.py``),
  through a ``torch.autograd.Function`` when a gradient is needed. This keeps a small
  convolution's host cost close to PyTorch's own.

Both routes share the derivatives below, so they compute the same values. With
``y = T(x, w) + b`` (T the transposed convolution, linear in x and in w):

* dx = C(dy, w), the direct convolution of dy (``grad_input``: the adjoint of T in x);
* dw = G(x, dy) (``grad_weight``: the adjoint of T in w);
* db = dy summed over all but the channel dimension (``grad_bias``).

C and G are again bilinear, and their derivatives are expressed with T, C and G:

* C(dy, w) = dx:  d/d(dy) <- T(g, w);   d/dw <- G(g, dy)
* G(x, dy) = dw:  d/dx <- C(dy, g);     d/d(dy) <- T(x, g)
* db:             d/d(dy) <- g broadcast over dy's shape

so every op is differentiable any number of times (gradgradcheck), and each gradient is
computed only when ``ctx.needs_input_grad`` asks for it.
"""

from __future__ import annotations

import torch

from . import _kernels, ops

__all__ = ["conv_transpose", "grad_input", "grad_weight", "grad_bias", "uses_dispatcher"]

_Tensor = torch.Tensor
_Parameter = torch.nn.Parameter
_is_grad_enabled = torch.is_grad_enabled
_torch_function_mode_enabled = torch._C._is_torch_function_mode_enabled
_dispatch_mode_depth = torch._C._len_torch_dispatch_stack
_functorch_level = torch._C._functorch.peek_interpreter_stack
_any_autocast = getattr(torch._C, "_is_any_autocast_enabled", None)
if _any_autocast is None:  # older torch spelling

    def _any_autocast() -> bool:
        return torch.is_autocast_enabled() or torch.is_autocast_cpu_enabled()


try:
    from torch.compiler import is_compiling as _is_compiling
except ImportError:  # pragma: no cover - torch < 2.3
    from torch._dynamo import is_compiling as _is_compiling


def uses_dispatcher(a: torch.Tensor, b: torch.Tensor, c=None) -> bool:
    """Whether a call on these tensors must take the dispatcher route (see the module doc)."""
    # is_compiling() comes first: under torch.compile nothing else here is traced.
    if _is_compiling():
        return True
    # Tensor subclasses (FakeTensor, FunctionalTensor, user subclasses).
    ta, tb, tc = type(a), type(b), type(c)
    if not (
        (ta is _Tensor or ta is _Parameter)
        and (tb is _Tensor or tb is _Parameter)
        and (c is None or tc is _Tensor or tc is _Parameter)
    ):
        return True
    # Meta and other devices: the dispatcher picks the kernel (the fake one for meta).
    if not ((a.is_cuda or a.is_cpu) and (b.is_cuda or b.is_cpu) and (c is None or c.is_cuda or c.is_cpu)):
        return True
    return bool(
        _torch_function_mode_enabled()
        or _dispatch_mode_depth()
        or _any_autocast()
        or _functorch_level() is not None
    )


def _needs_grad(*tensors) -> bool:
    if not _is_grad_enabled():
        return False
    for t in tensors:
        if t is not None and t.requires_grad:
            return True
    return False


# ---------------------------------------------------------------------------------------
# The routed ops. Arguments: stride, padding, output_padding, dilation as per-dimension
# sequences of ints, groups an int; inputs batched (rank spatial_dims + 2).
# ---------------------------------------------------------------------------------------


def conv_transpose(x, w, b, stride, padding, output_padding, groups, dilation):
    """y = conv_transpose(x, w) + b."""
    if uses_dispatcher(x, w, b):
        return ops.conv_transpose(x, w, b, stride, padding, output_padding, groups, dilation)
    if _needs_grad(x, w, b):
        return _ConvTransposeFunction.apply(x, w, b, (stride, padding, output_padding, groups, dilation))
    return _kernels.conv_transpose(x, w, b, stride, padding, output_padding, groups, dilation)


def grad_input(dy, w, input_size, stride, padding, output_padding, groups, dilation):
    """dx = C(dy, w), of size input_size."""
    if uses_dispatcher(dy, w):
        return ops.conv_transpose_grad_input(dy, w, input_size, stride, padding, output_padding, groups, dilation)
    if _needs_grad(dy, w):
        return _GradInputFunction.apply(dy, w, input_size, (stride, padding, output_padding, groups, dilation))
    return _kernels.grad_input(dy, w, input_size, stride, padding, output_padding, groups, dilation)


def grad_weight(x, dy, weight_size, stride, padding, output_padding, groups, dilation):
    """dw = G(x, dy), of size weight_size."""
    if uses_dispatcher(x, dy):
        return ops.conv_transpose_grad_weight(x, dy, weight_size, stride, padding, output_padding, groups, dilation)
    if _needs_grad(x, dy):
        return _GradWeightFunction.apply(x, dy, weight_size, (stride, padding, output_padding, groups, dilation))
    return _kernels.grad_weight(x, dy, weight_size, stride, padding, output_padding, groups, dilation)


def grad_bias(dy):
    """db = dy summed over all but dimension 1."""
    if uses_dispatcher(dy, dy):
        return ops.conv_transpose_grad_bias(dy)
    if _needs_grad(dy):
        return _GradBiasFunction.apply(dy)
    return _kernels.grad_bias(dy)


# ---------------------------------------------------------------------------------------
# Derivatives, shared by both routes. ``args`` is (stride, padding, output_padding, groups,
# dilation). _save_* keeps what the backward needs (only the tensors a requested gradient
# reads); _grads_* returns the gradients of the op's tensor inputs, each computed only
# when ctx.needs_input_grad asks for it.
# ---------------------------------------------------------------------------------------


def _save_conv_transpose(ctx, x, w, args):
    need_x, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    ctx.save_for_backward(x if need_w else None, w if need_x else None)
    ctx.conv_args = args
    ctx.x_size = x.shape
    ctx.w_size = w.shape


def _grads_conv_transpose(ctx, grad):
    x, w = ctx.saved_tensors
    args = ctx.conv_args
    need_x, need_w, need_b = ctx.needs_input_grad[:3]
    gx = grad_input(grad, w, ctx.x_size, *args) if need_x else None
    gw = grad_weight(x, grad, ctx.w_size, *args) if need_w else None
    gb = grad_bias(grad) if need_b else None
    return gx, gw, gb


def _save_grad_input(ctx, dy, w, args):
    need_dy, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    ctx.save_for_backward(dy if need_w else None, w if need_dy else None)
    ctx.conv_args = args
    ctx.w_size = w.shape


def _grads_grad_input(ctx, grad):
    dy, w = ctx.saved_tensors
    args = ctx.conv_args
    need_dy, need_w = ctx.needs_input_grad[:2]
    gdy = conv_transpose(grad, w, None, *args) if need_dy else None
    gw = grad_weight(grad, dy, ctx.w_size, *args) if need_w else None
    return gdy, gw


def _save_grad_weight(ctx, x, dy, args):
    need_x, need_dy = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    ctx.save_for_backward(x if need_dy else None, dy if need_x else None)
    ctx.conv_args = args
    ctx.x_size = x.shape


def _grads_grad_weight(ctx, grad):
    x, dy = ctx.saved_tensors
    args = ctx.conv_args
    need_x, need_dy = ctx.needs_input_grad[:2]
    gx = grad_input(dy, grad, ctx.x_size, *args) if need_x else None
    gdy = conv_transpose(x, grad, None, *args) if need_dy else None
    return gx, gdy


def _save_grad_bias(ctx, dy):
    ctx.dy_size = dy.shape


def _grads_grad_bias(ctx, grad):
    size = ctx.dy_size
    view = [1] * len(size)
    view[1] = size[1]
    return grad.reshape(view).expand(size)


# The dispatcher route: autograd kernels of torch.ops.convt.* (inputs as in the schemas;
# one gradient, or None, per input).
_NO_GRADS = (None,) * 5

torch.library.register_autograd(
    "convt::conv_transpose",
    lambda ctx, grad: _grads_conv_transpose(ctx, grad) + _NO_GRADS,
    setup_context=lambda ctx, inputs, output: _save_conv_transpose(ctx, inputs[0], inputs[1], tuple(inputs[3:])),
    lib=ops.LIBRARY,
)
torch.library.register_autograd(
    "convt::conv_transpose_grad_input",
    lambda ctx, grad: _grads_grad_input(ctx, grad) + (None,) + _NO_GRADS,
    setup_context=lambda ctx, inputs, output: _save_grad_input(ctx, inputs[0], inputs[1], tuple(inputs[3:])),
    lib=ops.LIBRARY,
)
torch.library.register_autograd(
    "convt::conv_transpose_grad_weight",
    lambda ctx, grad: _grads_grad_weight(ctx, grad) + (None,) + _NO_GRADS,
    setup_context=lambda ctx, inputs, output: _save_grad_weight(ctx, inputs[0], inputs[1], tuple(inputs[3:])),
    lib=ops.LIBRARY,
)
torch.library.register_autograd(
    "convt::conv_transpose_grad_bias",
    _grads_grad_bias,
    setup_context=lambda ctx, inputs, output: _save_grad_bias(ctx, inputs[0]),
    lib=ops.LIBRARY,
)


# The eager route: autograd.Functions over the kernels, the convolution arguments packed
# in one tuple. (The forward(ctx, ...) form and few arguments keep Function.apply cheap.)
class _ConvTransposeFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b, args):
        _save_conv_transpose(ctx, x, w, args)
        return _kernels.conv_transpose(x, w, b, *args)

    @staticmethod
    def backward(ctx, grad):
        return _grads_conv_transpose(ctx, grad) + (None,)


class _GradInputFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, dy, w, input_size, args):
        _save_grad_input(ctx, dy, w, args)
        return _kernels.grad_input(dy, w, input_size, *args)

    @staticmethod
    def backward(ctx, grad):
        return _grads_grad_input(ctx, grad) + (None, None)


class _GradWeightFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dy, weight_size, args):
        _save_grad_weight(ctx, x, dy, args)
        return _kernels.grad_weight(x, dy, weight_size, *args)

    @staticmethod
    def backward(ctx, grad):
        return _grads_grad_weight(ctx, grad) + (None, None)


class _GradBiasFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, dy):
        _save_grad_bias(ctx, dy)
        return _kernels.grad_bias(dy)

    @staticmethod
    def backward(ctx, grad):
        return _grads_grad_bias(ctx, grad)
