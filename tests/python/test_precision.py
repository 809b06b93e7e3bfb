"""The float32 math mode follows PyTorch's cuDNN TF32 switch (SPEC §3), read at call time,
through either of PyTorch's APIs: torch.backends.cudnn.allow_tf32 and, on newer torch,
torch.backends.cudnn.conv.fp32_precision. Both readers: the package's and the one pasted
into exported KernelBench solutions (convt/kernelbench/runtime.py)."""

from __future__ import annotations

import pytest
import torch

from convt import _kernels
from convt.kernelbench import runtime

TF32, STRICT = _kernels.MATH_ALLOW_TF32, _kernels.MATH_STRICT_FP32
assert (runtime._CONVT_MATH_ALLOW_TF32, runtime._CONVT_MATH_STRICT_FP32) == (TF32, STRICT)
cudnn = torch.backends.cudnn
HAS_FP32_PRECISION = getattr(cudnn, "conv", None) is not None


@pytest.fixture(params=["package", "export"])
def math_mode(request):
    """The math-mode reader under test."""
    return _kernels.cuda_math_mode if request.param == "package" else runtime._convt_math_mode


@pytest.fixture
def restore_flags():
    saved = {}
    if HAS_FP32_PRECISION:
        saved = {
            "conv": cudnn.conv.fp32_precision,
            "cudnn": cudnn.fp32_precision,
            "generic": torch.backends.fp32_precision,
        }
    else:
        saved = {"allow_tf32": cudnn.allow_tf32}
    yield
    if HAS_FP32_PRECISION:
        torch.backends.fp32_precision = saved["generic"]
        cudnn.fp32_precision = saved["cudnn"]
        cudnn.conv.fp32_precision = saved["conv"]
    else:
        cudnn.allow_tf32 = saved["allow_tf32"]


def test_default_allows_tf32(restore_flags, math_mode):
    """PyTorch's default lets cuDNN convolutions use TF32, so convt may too."""
    assert math_mode() == TF32


def test_legacy_allow_tf32_flag(restore_flags, math_mode):
    cudnn.allow_tf32 = False
    assert math_mode() == STRICT
    cudnn.allow_tf32 = True
    assert math_mode() == TF32


@pytest.mark.skipif(not HAS_FP32_PRECISION, reason="this torch has no fp32_precision API")
def test_fp32_precision_api(restore_flags, math_mode):
    cudnn.conv.fp32_precision = "ieee"
    assert math_mode() == STRICT
    cudnn.conv.fp32_precision = "tf32"
    assert math_mode() == TF32
    # "none" defers to the cuDNN-wide setting, then to the global one.
    cudnn.conv.fp32_precision = "none"
    cudnn.fp32_precision = "tf32"
    assert math_mode() == TF32
    cudnn.fp32_precision = "none"
    torch.backends.fp32_precision = "tf32"
    assert math_mode() == TF32
    torch.backends.fp32_precision = "ieee"
    assert math_mode() == STRICT


def test_cpu_calls_are_strict_float32():
    """The CPU backend computes float32 in float32 (no reduced-precision mode)."""
    x = torch.randn(1, 2, 3, 3)
    assert _kernels._exec_args(x)[0] == STRICT
