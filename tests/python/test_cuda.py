"""CUDA: the sweep in float32 (TF32 allowed and strict), float16 and bfloat16 within the
precision budgets of SPEC §3, output layouts as PyTorch's (cuDNN's) on the GPU, streams,
devices, CUDA-graph capture of a training step, and torch.compile.

Oracle: the same op in float64 on the CPU (PyTorch's), on the same inputs (the
low-precision values, upcast). Metric: max |out - oracle| / max |oracle|.
Budgets: float32 with TF32 8e-4, strict float32 4e-6, float16 1.5e-3, bfloat16 1e-2.
"""

from __future__ import annotations

import contextlib

import pytest
import torch

import convt
from conftest import (
    record_error,
    CONVT_FUNCTIONAL,
    TORCH_FUNCTIONAL,
    case_id,
    make_cases,
    make_tensors,
    rel_error,
    requires_convt_cuda,
)

BUDGETS = {"float32-tf32": 8e-4, "float32-strict": 4e-6, "float16": 1.5e-3, "bfloat16": 1e-2}
DTYPES = {"float32-tf32": torch.float32, "float32-strict": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}

SWEEP = make_cases(200, seed=4711)


@contextlib.contextmanager
def cudnn_tf32(enabled: bool):
    """Switch PyTorch's TF32 flag for cuDNN convolutions (either API), restoring it after."""
    cudnn = torch.backends.cudnn
    conv = getattr(cudnn, "conv", None)
    if conv is not None:
        old = conv.fp32_precision
        conv.fp32_precision = "tf32" if enabled else "ieee"
        try:
            yield
        finally:
            conv.fp32_precision = old
    else:
        old = cudnn.allow_tf32
        cudnn.allow_tf32 = enabled
        try:
            yield
        finally:
            cudnn.allow_tf32 = old


def _oracle(case, x, w, b, grad):
    """Output and gradients in float64 on the CPU."""
    x64, w64 = x.detach().cpu().double().requires_grad_(), w.detach().cpu().double().requires_grad_()
    b64 = None if b is None else b.detach().cpu().double().requires_grad_()
    out = TORCH_FUNCTIONAL[case.dims](x64, w64, b64, **case.args())
    inputs = [t for t in (x64, w64, b64) if t is not None]
    grads = torch.autograd.grad(out, inputs, grad.detach().cpu().double())
    return out, grads


@requires_convt_cuda
@pytest.mark.parametrize("mode", list(BUDGETS))
@pytest.mark.parametrize("case", SWEEP, ids=case_id)
def test_cuda_sweep_within_budget(case, mode):
    dtype, budget = DTYPES[mode], BUDGETS[mode]
    x, w, b = make_tensors(case, dtype=dtype, device="cuda", seed=11, requires_grad=True)
    with cudnn_tf32(mode != "float32-strict"):
        out = CONVT_FUNCTIONAL[case.dims](x, w, b, **case.args())
        grad = (torch.rand(out.shape, generator=torch.Generator().manual_seed(12), dtype=torch.float64) * 2 - 1)
        grad = grad.to(dtype).cuda()
        inputs = [t for t in (x, w, b) if t is not None]
        grads = torch.autograd.grad(out, inputs, grad)
        ref = TORCH_FUNCTIONAL[case.dims](x.detach(), w.detach(), None if b is None else b.detach(), **case.args())
    torch.cuda.synchronize()
    assert out.dtype == dtype and out.device == x.device and out.shape == ref.shape
    if out.numel():
        assert out.stride() == ref.stride(), f"strides {out.stride()} != PyTorch's {ref.stride()}"
    oracle, oracle_grads = _oracle(case, x, w, b, grad)
    err = rel_error(out, oracle)
    record_error(mode, "forward", err, budget)
    assert err <= budget, f"forward {err:.3g} > {budget}"
    for name, g, o in zip(("input", "weight", "bias"), grads, oracle_grads):
        assert g.dtype == dtype and g.shape == o.shape
        err = rel_error(g, o)
        record_error(mode, f"grad_{name}", err, budget)
        assert err <= budget, f"grad {name} {err:.3g} > {budget}"


@requires_convt_cuda
@pytest.mark.parametrize("case", make_cases(40, seed=5), ids=case_id)
def test_cuda_float64_matches_cpu(case):
    x, w, b = make_tensors(case, dtype=torch.float64, device="cuda", seed=1)
    out = CONVT_FUNCTIONAL[case.dims](x, w, b, **case.args())
    oracle = TORCH_FUNCTIONAL[case.dims](x.cpu(), w.cpu(), None if b is None else b.cpu(), **case.args())
    assert rel_error(out, oracle) <= 1e-12


@requires_convt_cuda
def test_cuda_gradcheck_and_gradgradcheck():
    for case in [c for c in make_cases(30, seed=99) if c.batch != 0][:4]:
        x, w, b = make_tensors(case, dtype=torch.float64, device="cuda", seed=2, requires_grad=True)
        fn = lambda x, w, b: CONVT_FUNCTIONAL[case.dims](x, w, b, **case.args())  # noqa: E731
        inputs = (x, w, b if b is not None else torch.zeros(case.out_channels, dtype=torch.float64, device="cuda", requires_grad=True))
        assert torch.autograd.gradcheck(fn, inputs)
        assert torch.autograd.gradgradcheck(fn, inputs)


@requires_convt_cuda
def test_cuda_uses_the_current_stream():
    """A convt call on a side stream is ordered after the work queued before it there."""
    x = torch.randn(8, 32, 64, 64, device="cuda")
    w = torch.randn(32, 16, 3, 3, device="cuda")
    ref = torch.nn.functional.conv_transpose2d(x * 3, w, None, 2)
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for _ in range(3):
            y = x * 3  # queued on the side stream, read by convt right after
            out = convt.conv_transpose2d(y, w, None, 2)
    stream.synchronize()
    assert rel_error(out, ref) <= 8e-4


@requires_convt_cuda
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_cuda_respects_the_tensors_device():
    x = torch.randn(2, 4, 5, 5, device="cuda:1")
    w = torch.randn(4, 3, 3, 3, device="cuda:1")
    with torch.cuda.device(0):
        out = convt.conv_transpose2d(x, w, None, 2)
    assert out.device == x.device
    assert rel_error(out, torch.nn.functional.conv_transpose2d(x, w, None, 2)) <= 8e-4


@requires_convt_cuda
def test_cuda_mixed_devices_raise_pytorchs_error():
    x = torch.randn(2, 4, 5, 5)
    w = torch.randn(4, 3, 3, 3, device="cuda")
    for args in ((x, w), (x.cuda(), w, torch.randn(3))):
        with pytest.raises(RuntimeError) as torch_error:
            torch.nn.functional.conv_transpose2d(*args)
        with pytest.raises(type(torch_error.value), match="Expected all tensors to be on the same device"):
            convt.conv_transpose2d(*args)


@requires_convt_cuda
def test_cuda_graph_capture_of_a_training_step():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        convt.nn.ConvTranspose2d(8, 8, 4, stride=2, padding=1),
        torch.nn.ReLU(),
        convt.nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1),
    ).cuda()
    reference = torch.nn.Sequential(
        torch.nn.ConvTranspose2d(8, 8, 4, stride=2, padding=1),
        torch.nn.ReLU(),
        torch.nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1),
    ).cuda()
    reference.load_state_dict(model.state_dict())
    static_x = torch.randn(4, 8, 6, 6, device="cuda")

    # Warm up on a side stream, as CUDA-graph capture requires.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            model.zero_grad(set_to_none=True)
            model(static_x).square().mean().backward()
    torch.cuda.current_stream().wait_stream(side)

    graph = torch.cuda.CUDAGraph()
    model.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        static_loss = model(static_x).square().mean()
        static_loss.backward()

    for _ in range(2):
        static_x.copy_(torch.randn_like(static_x))
        graph.replay()
        torch.cuda.synchronize()
        reference.zero_grad(set_to_none=True)
        ref_loss = reference(static_x).square().mean()
        ref_loss.backward()
        assert rel_error(static_loss, ref_loss) <= 8e-4
        for p, q in zip(model.parameters(), reference.parameters()):
            assert rel_error(p.grad, q.grad) <= 4e-3


@requires_convt_cuda
def test_cuda_math_mode_follows_pytorchs_flag():
    """Strict float32 meets its budget on a reduction long enough for TF32 to miss it."""
    g = torch.Generator().manual_seed(0)
    x = torch.rand(2, 256, 8, 8, generator=g).cuda()
    w = torch.rand(256, 8, 3, 3, generator=g).cuda()
    oracle = torch.nn.functional.conv_transpose2d(x.cpu().double(), w.cpu().double(), None, 2)
    with cudnn_tf32(False):
        strict = convt.conv_transpose2d(x, w, None, 2)
    with cudnn_tf32(True):
        tf32 = convt.conv_transpose2d(x, w, None, 2)
    assert rel_error(strict, oracle) <= 4e-6
    assert rel_error(tf32, oracle) <= 8e-4


@requires_convt_cuda
@pytest.mark.slow
def test_cuda_compile_fullgraph():
    torch._dynamo.reset()
    model = torch.nn.Sequential(convt.nn.ConvTranspose2d(4, 4, 4, stride=2, padding=1), torch.nn.GELU()).cuda()
    compiled = torch.compile(model, fullgraph=True)
    x = torch.randn(2, 4, 8, 8, device="cuda", requires_grad=True)
    out = compiled(x)
    out.sum().backward()
    ref = model(x)
    assert rel_error(out, ref) <= 1e-6


@requires_convt_cuda
def test_cuda_autocast_matches_pytorch():
    x = torch.randn(2, 4, 8, 8, device="cuda")
    m = torch.nn.ConvTranspose2d(4, 4, 3, stride=2).cuda()
    c = convt.nn.ConvTranspose2d(4, 4, 3, stride=2).cuda()
    c.load_state_dict(m.state_dict())
    for dtype in (torch.float16, torch.bfloat16):
        with torch.autocast("cuda", dtype=dtype):
            out, ref = c(x), m(x)
        assert out.dtype == ref.dtype == dtype
        assert rel_error(out, ref) <= 1e-2


@requires_convt_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
def test_cuda_fake_kernels_match_real_outputs(dtype):
    """Fake kernels give the real outputs' shapes and strides on CUDA (cuDNN's layouts)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    ops = torch.ops.convt
    mode = FakeTensorMode()
    for case in [c for c in make_cases(60, seed=321) if c.batch is not None]:
        x, w, b = make_tensors(case, dtype=dtype, device="cuda", seed=1)
        args = ([*case.stride], [*case.padding], [*case.output_padding], case.groups, [*case.dilation])
        y = ops.conv_transpose(x, w, b, *args)
        dy = torch.randn_like(y)
        for op, sample in [
            (ops.conv_transpose, (x, w, b, *args)),
            (ops.conv_transpose_grad_input, (dy, w, list(x.shape), *args)),
            (ops.conv_transpose_grad_weight, (x, dy, list(w.shape), *args)),
            (ops.conv_transpose_grad_bias, (dy,)),
        ]:
            real = op(*sample)
            with mode:
                fake = op(*[mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in sample])
            assert fake.shape == real.shape and fake.device == real.device, (case, op)
            if real.numel():
                assert fake.stride() == real.stride(), (case, op)


@requires_convt_cuda
def test_cuda_opcheck():
    for case in [c for c in make_cases(30, seed=4242) if c.batch][:4]:
        x, w, b = make_tensors(case, dtype=torch.float64, device="cuda", seed=1, requires_grad=True)
        args = ([*case.stride], [*case.padding], [*case.output_padding], case.groups, [*case.dilation])
        torch.library.opcheck(torch.ops.convt.conv_transpose.default, (x, w, b, *args))
        y = torch.ops.convt.conv_transpose(x.detach(), w.detach(), None, *args)
        dy = torch.randn_like(y).requires_grad_()
        torch.library.opcheck(torch.ops.convt.conv_transpose_grad_input.default, (dy, w, list(x.shape), *args))
        torch.library.opcheck(torch.ops.convt.conv_transpose_grad_weight.default, (x, dy, list(w.shape), *args))
        torch.library.opcheck(torch.ops.convt.conv_transpose_grad_bias.default, (dy,))
