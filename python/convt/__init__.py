"""convt: fast transposed convolution for PyTorch.

Drop-in replacements for PyTorch's transposed convolutions, computed by convt's own
C++/CUDA kernels:

* ``convt.conv_transpose1d/2d/3d`` — ``torch.nn.functional.conv_transpose1d/2d/3d``;
* ``convt.nn.ConvTranspose1d/2d/3d`` — ``torch.nn.ConvTranspose1d/2d/3d``;
* ``convt.convert(model)`` — swap a model's ``nn.ConvTranspose*d`` for convt's;
* ``torch.ops.convt.*`` — the operators, for torch.compile and friends (``convt.ops``);
* ``convt.describe_forward(input, weight, ...)`` — the kernel a forward call would run, and
  why (what ``CONVT_LOG=1`` prints per call);
* ``convt.clear_weight_cache()`` — forget the weight re-layouts CUDA forwards keep per
  weight while it is unchanged (needed only after changing a weight through ``.data``);
* ``convt.release_workspaces()`` — give back the workspaces (up to 32 MiB per device and
  stream) kept for the next CUDA call on the same stream.

Results, output layouts, errors, autograd (to any order), autocast and torch.compile
behave as PyTorch's. float32 on CUDA uses TF32 exactly when PyTorch's cuDNN convolutions
would (``torch.backends.cudnn.allow_tf32`` / ``torch.backends.cudnn.conv.fp32_precision``).
"""

from . import _C
from . import ops
from . import _dispatch  # noqa: F401  (registers the autograd of torch.ops.convt.*)
from . import nn
from .convert import convert
from .functional import conv_transpose1d, conv_transpose2d, conv_transpose3d, describe_forward
from ._kernels import clear_weight_cache, release_workspaces

__version__ = _C.__version__

build_info = _C.build_info
built_with_cuda = _C.built_with_cuda
cuda_available = _C.cuda_available

__all__ = [
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "describe_forward",
    "clear_weight_cache",
    "release_workspaces",
    "convert",
    "nn",
    "ops",
    "build_info",
    "built_with_cuda",
    "cuda_available",
    "__version__",
]
