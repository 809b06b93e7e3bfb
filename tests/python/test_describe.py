"""convt.describe_forward: the forward kernel a call would run, and why.

CPU: the CPU backend, for every argument combination the op accepts, with the op's own
argument errors. CUDA (skipped without a GPU): the dispatcher's choice, following PyTorch's
float32 precision setting (split TF32 when TF32 is off), the direct kernel for float64.
The binding also describes shape-only descriptors (data pointer 0), as the KernelBench
exporter passes them.
"""
import pytest
import torch

import convt
from convt import _C, _kernels
from convt.bench.runner import cudnn_math

CUDA = torch.cuda.is_available() and convt.cuda_available()


def test_cpu_tensors_run_the_cpu_backend():
    x = torch.randn(2, 4, 5, 6)
    w = torch.randn(4, 3, 3, 3)
    b = torch.randn(3)
    assert convt.describe_forward(x, w, b, stride=2, padding=1) == "CPU backend"
    assert convt.describe_forward(x[0], w) == "CPU backend"  # unbatched
    assert convt.describe_forward(torch.randn(1, 4, 7), torch.randn(4, 2, 3), groups=2) == "CPU backend"


def test_bad_arguments_raise_the_ops_errors():
    x = torch.randn(1, 4, 5, 6)
    w = torch.randn(4, 3, 3, 3)
    with pytest.raises(TypeError, match=r"conv_transpose2d\(\): argument 'stride'"):
        convt.describe_forward(x, w, stride="2")
    with pytest.raises(RuntimeError):
        convt.describe_forward(torch.randn(1, 5, 5, 6), w)  # channels do not match the weight
    with pytest.raises(TypeError, match="argument 'weight'"):
        convt.describe_forward(x, None)


def test_shape_only_descriptors():
    def desc(sizes):
        strides, acc = [], 1
        for size in reversed(sizes):
            strides.append(acc)
            acc *= size
        return (0, tuple(sizes), tuple(reversed(strides)), _kernels.DTYPE_CODES[torch.float32], -1)

    params = (1, (2,), (1,), (1,), (1,), 1)
    assert _C.describe_forward(desc((2, 4, 9)), desc((4, 6, 3)), None, params, 0) == "CPU backend"


@pytest.mark.skipif(not CUDA, reason="no CUDA device")
def test_cuda_dispatcher_choices():
    x = torch.randn(2, 32, 16, 32, device="cuda")
    w = torch.randn(32, 32, 3, 3, device="cuda")
    with cudnn_math("default"):
        tf32 = convt.describe_forward(x, w, padding=1)
    with cudnn_math("strict"):
        strict = convt.describe_forward(x, w, padding=1)
    assert tf32.startswith("implicit-GEMM") and "3xTF32" not in tf32
    assert strict.startswith("implicit-GEMM") and "3xTF32" in strict
    bf16 = convt.describe_forward(x.bfloat16(), w.bfloat16(), padding=1)
    assert bf16.startswith("implicit-GEMM") and "3xTF32" not in bf16
    f64 = convt.describe_forward(x.double(), w.double(), padding=1)
    assert f64.startswith("direct kernel") and "float64" in f64
