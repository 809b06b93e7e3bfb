"""The four convt ops on real CPU and CUDA tensors, through the extension module.

Each function validates its call in C++ (``convt._C.prepare_*``: PyTorch's rules and
wording), allocates the output in the memory format PyTorch would return and, when the
backend asks for one, a workspace on the tensors' device, then runs the op on the current
CUDA stream (``convt._C.run``, GIL released). Nothing here knows about autograd or
torch.library: these are the device kernels behind ``torch.ops.convt.*`` and the eager
fast path of ``convt.functional`` (see ``_dispatch.py``).

Tensors are handed over as descriptors ``(data_ptr, sizes, strides, dtype_code,
device_code)``; any non-negative strides are accepted, so no input is copied.
"""

from __future__ import annotations

import os
import weakref
from typing import Optional, Sequence

import torch

from . import _C

__all__ = [
    "conv_transpose",
    "grad_input",
    "grad_weight",
    "grad_bias",
    "cuda_math_mode",
    "describe",
    "unsupported_dtype_error",
    "pytorch_channels_last",
    "cudnn_channels_last",
    "clear_weight_cache",
    "weight_cache_enabled",
    "release_workspaces",
]

# convt::DType codes.
DTYPE_CODES = {torch.float32: 0, torch.float64: 1, torch.float16: 2, torch.bfloat16: 3}

# convt::MathMode codes.
MATH_ALLOW_TF32 = 0
MATH_STRICT_FP32 = 1

# The names PyTorch's dispatch macros print for unsupported scalar types.
_SCALAR_TYPE_NAMES = {
    torch.int64: "Long",
    torch.int32: "Int",
    torch.int16: "Short",
    torch.int8: "Char",
    torch.uint8: "Byte",
    torch.bool: "Bool",
    torch.complex32: "ComplexHalf",
    torch.complex64: "ComplexFloat",
    torch.complex128: "ComplexDouble",
}

_CHANNELS_LAST = {4: torch.channels_last, 5: torch.channels_last_3d}


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def unsupported_dtype_error(
    op_name: str, tensors: Sequence[Optional[torch.Tensor]], roles: Sequence[str] = ("weight", "bias")
) -> Exception:
    """The error PyTorch raises for a call whose tensors have an unsupported or mixed dtype.

    All tensors of one unsupported dtype: NotImplementedError (a RuntimeError), as
    PyTorch's CUDA kernels raise it (``"conv_transpose2d" not implemented for 'Long'``).
    Mixed dtypes: RuntimeError naming both, as the C++ validation words it; ``roles``
    names the tensors after the first.
    """
    first = tensors[0].dtype
    for role, t in zip(roles, tensors[1:]):
        if t is not None and t.dtype != first:
            return RuntimeError(
                f"Input type ({_dtype_name(first)}) and {role} type ({_dtype_name(t.dtype)}) "
                "should be the same"
            )
    name = _SCALAR_TYPE_NAMES.get(first, _dtype_name(first))
    return NotImplementedError(f'"{op_name}" not implemented for \'{name}\'')


def describe(t: torch.Tensor, with_data: bool = True) -> tuple:
    """The descriptor of a tensor for ``convt._C``; raises KeyError for an unsupported dtype.

    ``with_data=False`` gives a shape-only descriptor (data pointer 0) for validation
    without data, e.g. of fake tensors.
    """
    return (
        t.data_ptr() if with_data else 0,
        t.shape,
        t.stride(),
        DTYPE_CODES[t.dtype],
        t.get_device() if t.is_cuda else -1,
    )


def cuda_math_mode() -> int:
    """The float32 math mode PyTorch's own cuDNN convolutions would use right now (SPEC §3).

    TF32 is allowed exactly when PyTorch lets cuDNN convolutions use it: on torch with the
    fp32_precision API, ``torch.backends.cudnn.conv.fp32_precision == "tf32"`` (a value of
    "none" defers to ``torch.backends.cudnn.fp32_precision``, then to
    ``torch.backends.fp32_precision``, as PyTorch resolves it); on older torch,
    ``torch.backends.cudnn.allow_tf32``.

    The flags are read on every call of a kernel, also when the kernel runs inside a
    torch.compile'd graph (the op is opaque to the compiler, so its kernel reads them when
    the graph runs). A captured CUDA graph keeps the mode that was current at capture.
    """
    if _fp32_precision is not None:
        # (The getters behind those properties, called directly: a call's host time.)
        precision = _fp32_precision("cuda", "conv")
        if precision == "none":
            precision = _fp32_precision("cuda", "all")
            if precision == "none":
                precision = _fp32_precision("generic", "all")
        return MATH_ALLOW_TF32 if precision == "tf32" else MATH_STRICT_FP32
    return MATH_ALLOW_TF32 if torch.backends.cudnn.allow_tf32 else MATH_STRICT_FP32


# torch._C's getter of the fp32_precision properties (backend, op): that of
# torch.backends.cudnn.conv is ("cuda", "conv"), of torch.backends.cudnn ("cuda", "all"), of
# torch.backends ("generic", "all"). None on a torch without the API.
_fp32_precision = (
    getattr(torch._C, "_get_fp32_precision_getter", None)
    if getattr(torch.backends.cudnn, "conv", None) is not None
    else None
)


try:
    _raw_stream = torch._C._cuda_getCurrentRawStream
except AttributeError:  # a torch built without CUDA

    def _raw_stream(index: int) -> int:
        return torch.cuda.current_stream(index).cuda_stream


_get_num_threads = torch.get_num_threads


def _exec_args(t: torch.Tensor) -> tuple:
    """(math, num_threads) for a call on the device of ``t``."""
    if t.is_cuda:
        return (cuda_math_mode() if t.dtype is torch.float32 else MATH_ALLOW_TF32), 0
    return MATH_STRICT_FP32, _get_num_threads()


_select_conv_backend = getattr(torch._C, "_select_conv_backend", None)
_backend_memory_format = getattr(torch._C, "_conv_determine_backend_memory_format", None)


def pytorch_channels_last(x, w, b, stride, padding, output_padding, groups, dilation) -> bool:
    """Whether PyTorch's own conv_transpose returns a channels_last result for this call.

    Asked only when the input or the weight is channels_last (otherwise PyTorch's result
    is contiguous). The answer depends on the backend PyTorch would pick (cuDNN, oneDNN or
    a native kernel, by dtype, device, arguments and flags), so it is asked of PyTorch's
    backend selection, as PyTorch's own FakeTensor kernels do. Works on fake tensors too.
    """
    if _select_conv_backend is not None:
        try:
            backend = _select_conv_backend(
                x, w, b, list(stride), list(padding), list(dilation), True, list(output_padding), groups
            )
            return _backend_memory_format(x, w, backend) != torch.contiguous_format
        except (RuntimeError, TypeError, ValueError):
            pass
    return cudnn_channels_last(x)


def cudnn_channels_last(x) -> bool:
    """cuDNN's rule for a channels_last operand: channels_last except in float64.

    The layout of the gradient ops' results, whose inputs are channels_last candidates."""
    return not (x.dtype is torch.float64 and x.is_cuda)


def _run(prepared: tuple, like: torch.Tensor, channels_last: bool) -> torch.Tensor:
    """Allocate the output of a prepared call (and its workspace), run it, return the output."""
    call, shape, _, workspace_bytes = prepared[:4]
    out = _empty_output(shape, like, channels_last)
    if like.is_cuda:
        index = like.get_device()
        stream = _raw_stream(index)
        if workspace_bytes:
            workspace = _workspace(workspace_bytes, like, index, stream, _capturing())
            _C.run(call, out.data_ptr(), out.stride(), stream, workspace[1], workspace_bytes)
            return out
        _C.run(call, out.data_ptr(), out.stride(), stream, 0, 0)
        return out
    _C.run(call, out.data_ptr(), out.stride(), 0, 0, 0)  # (the CPU backend takes no workspace)
    return out


def _empty_output(shape, like: torch.Tensor, channels_last: bool) -> torch.Tensor:
    if channels_last:
        return torch.empty(shape, dtype=like.dtype, device=like.device, memory_format=_CHANNELS_LAST[len(shape)])
    return like.new_empty(shape)


# Whether the current CUDA stream is being captured into a graph (torch's C getter, without
# the Python wrapper: a call's host time).
_capturing = getattr(torch._C, "_cuda_isCurrentStreamCapturing", None)
if _capturing is None:  # a torch built without CUDA

    def _capturing() -> bool:
        return False


# ---------------------------------------------------------------------------------------
# Workspaces kept per (device, stream). A CUDA call's workspace is read and written only by
# the kernels it enqueues on its stream, so the next call on the same stream can take the
# same memory: the stream orders its kernels after the previous call's. Workspaces of up to
# ``_WORKSPACE_KEPT_BYTES`` are kept that way (as cuBLAS keeps a workspace per handle and
# stream), larger ones are allocated for each call and released after it (the caching
# allocator reuses them in the same stream order). A kept workspace is replaced by a larger
# one when a call needs more; one allocated inside a CUDA-graph capture is never kept (the
# graph's kernels hold it for every replay). ``CONVT_KEEP_WORKSPACE=0`` (read at import)
# allocates every workspace per call; ``convt.release_workspaces()`` drops the kept ones.
# ---------------------------------------------------------------------------------------
_WORKSPACE_KEPT_BYTES = 32 << 20
_KEEP_WORKSPACE = os.environ.get("CONVT_KEEP_WORKSPACE", "1") != "0"
_workspaces: dict = {}


def _workspace(nbytes: int, like: torch.Tensor, index: int, stream: int, capturing: bool) -> tuple:
    """(buffer, 256-byte aligned pointer, usable bytes) of at least nbytes for a call on
    this device and stream; the caller holds the buffer until its kernels are enqueued."""
    if capturing or nbytes > _WORKSPACE_KEPT_BYTES or not _KEEP_WORKSPACE:
        buf = torch.empty(nbytes + 256, dtype=torch.uint8, device=like.device)
        return buf, (buf.data_ptr() + 255) & ~255, nbytes
    key = (index, stream)
    kept = _workspaces.get(key)
    if kept is not None and kept[2] >= nbytes:
        return kept
    if len(_workspaces) >= 64:  # many streams come and go: start over
        _workspaces.clear()
    size = max(nbytes, 1 << 20)
    buf = torch.empty(size + 256, dtype=torch.uint8, device=like.device)
    kept = (buf, (buf.data_ptr() + 255) & ~255, size)
    _workspaces[key] = kept
    return kept


def release_workspaces() -> None:
    """Drop the workspaces kept for later calls (up to 32 MiB per device and stream); the
    memory goes back to PyTorch's caching allocator, and the next call allocates again."""
    _workspaces.clear()


# The forward's weight re-layout, kept per weight tensor. The CUDA implicit-GEMM kernels
# pack the weight into their tiles' layout before each forward (``prepare_forward`` gives
# its bytes and a key naming the layout); a later forward whose weight is unchanged (same
# data pointer, strides and version counter: the rule of SPEC §5) under the same key and
# on the same stream takes the packing kept here and skips it. An in-place change of the
# weight (an optimizer step, ``copy_``, ``load_state_dict``) bumps its version counter, so
# the next forward packs again. Entries are keyed by the weight's id and dropped when the
# weight is collected. ``CONVT_WEIGHT_CACHE=0`` turns the cache off; forwards captured into
# a CUDA graph never use it (a replay would not see later in-place changes of the weight).
_weight_cache: dict = {}

# os.environ's own mapping (bytes keys on POSIX), read directly: a lookup through
# os.environ.get encodes the key and decodes the value on every call.
_environ_data = getattr(os.environ, "_data", None)
try:
    _WEIGHT_CACHE_KEY = os.environ.encodekey("CONVT_WEIGHT_CACHE")
    _ZERO_VALUE = os.environ.encodevalue("0")
except AttributeError:  # pragma: no cover - an os.environ without them
    _environ_data = None


def weight_cache_enabled() -> bool:
    """Whether CUDA forwards keep their weight re-layout (``CONVT_WEIGHT_CACHE``, default on)."""
    if _environ_data is not None:
        return _environ_data.get(_WEIGHT_CACHE_KEY) != _ZERO_VALUE
    return os.environ.get("CONVT_WEIGHT_CACHE", "1") != "0"


def clear_weight_cache() -> None:
    """Forget every kept weight re-layout (the next forward of each weight packs it again).

    Needed only where a weight's values change without its version counter: through
    ``weight.data`` (``m.weight.data.copy_(t)``), or by kernels outside PyTorch writing its
    memory. In-place PyTorch ops on the weight itself, ``load_state_dict`` and optimizer
    steps bump the counter and need nothing."""
    _weight_cache.clear()


def _weight_tag(w: torch.Tensor, key: int, stream: int) -> Optional[tuple]:
    """What a kept re-layout of ``w`` is valid for: None where ``w`` keeps no version
    counter (an inference-mode tensor), so that nothing is kept for it."""
    try:
        version = w._version
    except RuntimeError:
        return None
    return (w.data_ptr(), w.stride(), version, key, stream)


def _forget(ident: int, cache: dict = _weight_cache):
    """The weakref callback that drops the entry of the weight with this id (the dict held
    by the closure, so that it still works while the module is being torn down)."""

    def drop(_ref):
        cache.pop(ident, None)

    return drop


def _run_forward(prepared: tuple, x: torch.Tensor, w: torch.Tensor, channels_last: bool) -> torch.Tensor:
    """_run for a forward: on CUDA with its workspace kept per stream (``_workspace``) and
    the weight's re-layout kept in ``_weight_cache`` (few Python calls: this is a small
    layer's host time)."""
    if not x.is_cuda:
        return _run(prepared, x, channels_last)
    call, shape, _, workspace_bytes, nbytes, key = prepared
    index = x.get_device()
    stream = _raw_stream(index)
    capturing = _capturing()
    out = _empty_output(shape, x, channels_last)
    workspace = _workspace(workspace_bytes, x, index, stream, capturing) if workspace_bytes else _NO_WORKSPACE
    _launch_forward(call, out, stream, workspace[1], workspace_bytes, w, nbytes, key, capturing)
    return out


def _launch_forward(call, out, stream: int, workspace_ptr: int, workspace_bytes: int, w: torch.Tensor,
                    nbytes: int, key: int, capturing: bool) -> None:
    """_C.run of a CUDA forward into ``out``, the weight's packing taken from or kept in
    ``_weight_cache`` (``nbytes`` and ``key``: prepare_forward's weight re-layout)."""
    if not nbytes or capturing or not weight_cache_enabled():
        _C.run(call, out.data_ptr(), out.stride(), stream, workspace_ptr, workspace_bytes)
        return
    tag = _weight_tag(w, key, stream)
    if tag is None:
        _C.run(call, out.data_ptr(), out.stride(), stream, workspace_ptr, workspace_bytes)
        return
    ident = id(w)
    entry = _weight_cache.get(ident)
    if entry is not None and entry[0]() is w:
        if entry[1] == tag:
            _C.run(call, out.data_ptr(), out.stride(), stream, workspace_ptr, workspace_bytes, entry[3], True)
            return
    else:
        entry = None
    # Packed again: into the kept buffer where it is large enough and was used on this
    # stream (its readers are then ordered before), else a new one. The entry is dropped
    # while the buffer is being rewritten, and kept again once the forward is launched.
    _weight_cache.pop(ident, None)
    if entry is not None and entry[1][4] == stream and entry[2].numel() >= nbytes + 256:
        buf, ptr = entry[2], entry[3]
    else:
        buf = torch.empty(nbytes + 256, dtype=torch.uint8, device=out.device)
        ptr = (buf.data_ptr() + 255) & ~255
    _C.run(call, out.data_ptr(), out.stride(), stream, workspace_ptr, workspace_bytes, ptr, False)
    ref = entry[0] if entry is not None else weakref.ref(w, _forget(ident))
    _weight_cache[ident] = (ref, tag, buf, ptr)


_NO_WORKSPACE = (None, 0, 0)


def _op_name(spatial_dims: int) -> str:
    return f"conv_transpose{spatial_dims}d"


def conv_transpose(x, w, b, stride, padding, output_padding, groups, dilation) -> torch.Tensor:
    """y = conv_transpose(x, w) + b for a batched input x; arguments are per-dimension sequences."""
    math, threads = _exec_args(x)
    params = (len(stride), stride, padding, output_padding, dilation, groups)
    try:
        descs = (describe(x), describe(w), None if b is None else describe(b))
    except KeyError:
        raise unsupported_dtype_error(_op_name(len(stride)), (x, w, b)) from None
    prepared = _C.prepare_forward(*descs, params, math, threads, True)
    cl = prepared[2] and pytorch_channels_last(x, w, b, stride, padding, output_padding, groups, dilation)
    return _run_forward(prepared, x, w, cl)


def grad_input(dy, w, input_size, stride, padding, output_padding, groups, dilation) -> torch.Tensor:
    """dx of size input_size: the direct convolution of dy with w (the adjoint of the forward in x)."""
    math, threads = _exec_args(dy)
    params = (len(stride), stride, padding, output_padding, dilation, groups)
    try:
        descs = (describe(dy), describe(w))
    except KeyError:
        raise unsupported_dtype_error(_op_name(len(stride)), (dy, w)) from None
    prepared = _C.prepare_grad_input(*descs, input_size, params, math, threads, True)
    return _run(prepared, dy, prepared[2] and cudnn_channels_last(dy))


def grad_weight(x, dy, weight_size, stride, padding, output_padding, groups, dilation) -> torch.Tensor:
    """dw of size weight_size: the correlation of x with dy (the adjoint of the forward in w)."""
    math, threads = _exec_args(x)
    params = (len(stride), stride, padding, output_padding, dilation, groups)
    try:
        descs = (describe(x), describe(dy))
    except KeyError:
        raise unsupported_dtype_error(_op_name(len(stride)), (x, dy), ("grad_output",)) from None
    prepared = _C.prepare_grad_weight(*descs, weight_size, params, math, threads, True)
    return _run(prepared, x, prepared[2] and cudnn_channels_last(x))


def grad_bias(dy) -> torch.Tensor:
    """db[c]: the sum of dy over every dimension but the channel dimension."""
    math, threads = _exec_args(dy)
    try:
        desc = describe(dy)
    except KeyError:
        raise unsupported_dtype_error(_op_name(max(dy.dim() - 2, 1)), (dy,)) from None
    return _run(_C.prepare_grad_bias(desc, math, threads, True), dy, False)
