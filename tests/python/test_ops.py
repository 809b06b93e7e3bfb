"""torch.ops.convt.*: opcheck, fake kernels (shapes, strides, errors), meta tensors,
torch.compile(fullgraph=True), autocast, and the routing between the dispatcher and the
eager fast path."""

from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode

import convt
from convt import _dispatch
from conftest import case_id, make_cases, make_tensors, rel_error

OPS = torch.ops.convt

# Cases for opcheck: every op, a spread of arguments and layouts (batched only: the ops
# take batched tensors).
OPCHECK_CASES = [c for c in make_cases(80, seed=4242) if c.batch][:12]


def _op_args(case):
    return ([*case.stride], [*case.padding], [*case.output_padding], case.groups, [*case.dilation])


def _grad_op_samples(case, dtype=torch.float64):
    x, w, b = make_tensors(case, dtype=dtype, seed=1, requires_grad=True)
    y = OPS.conv_transpose(x.detach(), w.detach(), None, *_op_args(case))
    dy = torch.randn(y.shape, dtype=dtype).requires_grad_()
    return x, w, b, dy


@pytest.mark.parametrize("case", OPCHECK_CASES, ids=case_id)
def test_opcheck(case):
    x, w, b, dy = _grad_op_samples(case)
    args = _op_args(case)
    samples = [
        (OPS.conv_transpose.default, (x, w, b, *args)),
        (OPS.conv_transpose_grad_input.default, (dy, w, list(x.shape), *args)),
        (OPS.conv_transpose_grad_weight.default, (x, dy, list(w.shape), *args)),
        (OPS.conv_transpose_grad_bias.default, (dy,)),
    ]
    for op, sample in samples:
        torch.library.opcheck(op, sample)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fake_kernels_match_real_outputs(dtype):
    """Under FakeTensorMode every op gives the shape, dtype, device and strides the real
    kernel gives, over the sweep (channels_last and odd layouts included)."""
    cases = [c for c in make_cases(200, seed=777) if c.batch is not None]
    mode = FakeTensorMode()
    for case in cases:
        x, w, b, dy = _grad_op_samples(case, dtype)
        x, w, dy = x.detach(), w.detach(), dy.detach()
        b = None if b is None else b.detach()
        args = _op_args(case)
        calls = [
            (OPS.conv_transpose, (x, w, b, *args)),
            (OPS.conv_transpose_grad_input, (dy, w, list(x.shape), *args)),
            (OPS.conv_transpose_grad_weight, (x, dy, list(w.shape), *args)),
            (OPS.conv_transpose_grad_bias, (dy,)),
        ]
        for op, sample in calls:
            real = op(*sample)
            with mode:
                fake_sample = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in sample]
                fake = op(*fake_sample)
            assert fake.shape == real.shape, (case, op)
            assert fake.dtype == real.dtype and fake.device == real.device, (case, op)
            if real.numel():
                assert fake.stride() == real.stride(), (case, op)


def test_meta_tensors():
    x, w, b = torch.randn(2, 4, 5, 5), torch.randn(4, 3, 3, 3), torch.randn(3)
    out = convt.conv_transpose2d(x.to("meta"), w.to("meta"), b.to("meta"), stride=2, output_padding=1)
    assert out.device.type == "meta" and out.shape == (2, 3, 12, 12)
    ref = torch.nn.functional.conv_transpose2d(x, w, b, stride=2, output_padding=1)
    assert out.shape == ref.shape


def test_functional_routes():
    """Plain tensors take the eager route; subclasses, modes and autocast the dispatcher."""
    x, w = torch.randn(1, 2, 3, 3), torch.randn(2, 2, 3, 3)
    assert not _dispatch.uses_dispatcher(x, w)
    assert not _dispatch.uses_dispatcher(x, torch.nn.Parameter(w))
    with FakeTensorMode() as mode:
        fx = mode.from_tensor(x)
        assert _dispatch.uses_dispatcher(fx, w)
    assert _dispatch.uses_dispatcher(x.to("meta"), w)

    seen = []

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    with Record():
        out = convt.conv_transpose2d(x, w)
    assert "convt.conv_transpose.default" in seen
    assert torch.allclose(out, torch.nn.functional.conv_transpose2d(x, w), atol=1e-5)

    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert _dispatch.uses_dispatcher(x, w)


def test_autocast_cpu_matches_pytorch():
    """Under CPU autocast the op runs in the autocast dtype, as PyTorch's does."""
    x = torch.randn(2, 4, 5, 5)
    m = torch.nn.ConvTranspose2d(4, 3, 3, stride=2)
    c = convt.nn.ConvTranspose2d(4, 3, 3, stride=2)
    c.load_state_dict(m.state_dict())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = m(x)
        out = c(x)
        out64 = convt.conv_transpose2d(x.double(), m.weight.double(), None, 2)
    assert out.dtype == ref.dtype == torch.bfloat16
    assert out64.dtype == torch.float64  # autocast leaves float64 alone
    assert rel_error(out, ref) <= 1e-2
    # Gradients flow back to the float32 parameters.
    with torch.autocast("cpu", dtype=torch.bfloat16):
        c(x).float().sum().backward()
    assert c.weight.grad is not None and c.weight.grad.dtype == torch.float32


class _Decoder(torch.nn.Module):
    """A small decoder mixing convt layers of every dimensionality with other ops."""

    def __init__(self):
        super().__init__()
        self.up1 = convt.nn.ConvTranspose2d(8, 6, 4, stride=2, padding=1)
        self.up2 = convt.nn.ConvTranspose2d(6, 4, 3, stride=2, padding=1, output_padding=1, groups=2)
        self.up1d = convt.nn.ConvTranspose1d(4, 2, 5, stride=3, dilation=2)
        self.up3d = convt.nn.ConvTranspose3d(2, 2, (1, 3, 2), stride=(1, 2, 1), bias=False)

    def forward(self, x):
        y = torch.relu(self.up1(x))
        y = torch.tanh(self.up2(y))  # (N, 4, H, W)
        z = self.up1d(y.flatten(2))  # (N, 2, L)
        v = self.up3d(y[:, :2].unsqueeze(2))  # (N, 2, 1, H', W')
        return z.sum() + v.mean() + y.sum(dim=1).mean()


def _compile_and_compare(model, inputs, **compile_kwargs):
    compiled = torch.compile(model, fullgraph=True, **compile_kwargs)
    for x in inputs:
        x_eager = x.clone().requires_grad_()
        x_comp = x.clone().requires_grad_()
        model.zero_grad()
        ref = model(x_eager)
        ref.backward()
        ref_grads = [p.grad.clone() for p in model.parameters()] + [x_eager.grad]
        model.zero_grad()
        out = compiled(x_comp)
        out.backward()
        grads = [p.grad.clone() for p in model.parameters()] + [x_comp.grad]
        assert rel_error(out, ref) <= 1e-5
        for g, r in zip(grads, ref_grads):
            assert rel_error(g, r) <= 1e-5


@pytest.mark.slow
def test_compile_fullgraph_forward_and_backward():
    torch.manual_seed(0)
    torch._dynamo.reset()
    model = _Decoder()
    _compile_and_compare(model, [torch.randn(2, 8, 3, 3)])


@pytest.mark.slow
def test_compile_fullgraph_dynamic_shapes_and_output_size():
    torch.manual_seed(0)
    torch._dynamo.reset()

    class Up(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = convt.nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1)

        def forward(self, x):
            y = self.conv(x, output_size=[2 * x.shape[-2], 2 * x.shape[-1]])
            return convt.conv_transpose1d(y.flatten(2), torch.ones(2, 1, 2), stride=2).square().sum()

    _compile_and_compare(Up(), [torch.randn(1, 3, 4, 5), torch.randn(2, 3, 6, 3), torch.randn(3, 3, 5, 7)], dynamic=True)


@pytest.mark.slow
def test_compile_channels_last_and_unbatched():
    torch._dynamo.reset()
    w = torch.randn(4, 3, 3, 3)

    def f(x):
        return convt.conv_transpose2d(x, w, None, 2, 1, 1) * 2

    compiled = torch.compile(f, fullgraph=True)
    for x in (torch.randn(2, 4, 5, 5).to(memory_format=torch.channels_last), torch.randn(4, 5, 5)):
        out, ref = compiled(x), f(x)
        assert out.shape == ref.shape and out.stride() == ref.stride()
        assert rel_error(out, ref) <= 1e-6


def test_ops_are_listed():
    for name in ("conv_transpose", "conv_transpose_grad_input", "conv_transpose_grad_weight", "conv_transpose_grad_bias"):
        assert hasattr(torch.ops.convt, name)
    assert convt.ops.conv_transpose is torch.ops.convt.conv_transpose.default


def _random_strided(rng, nd):
    """A tensor view with a random size (1s included), dimension order, gaps and
    broadcast (stride 0) dimensions."""
    sizes = [rng.choice([1, 1, 2, 3]) for _ in range(nd)]
    order = list(range(nd))
    if rng.random() < 0.4:
        order = [0] + list(range(2, nd)) + [1]  # channels_last order
    else:
        rng.shuffle(order)
    base = torch.empty([sizes[d] * rng.choice([1, 2]) for d in order]).permute(*[order.index(d) for d in range(nd)])
    view = base[tuple(slice(0, s) for s in sizes)]
    if rng.random() < 0.2:
        d = rng.randrange(nd)
        view = view.narrow(d, 0, 1).expand(*[s if i != d else sizes[d] for i, s in enumerate(view.shape)])
    return view


def test_channels_last_rule_matches_pytorch():
    """The stride rule behind output layouts (C++ for real and static calls, Python for
    symbolic ones) is PyTorch's suggest_memory_format, degenerate sizes and strides included."""
    import random

    from torch._prims_common import suggest_memory_format

    from convt import _C, _kernels, ops

    rng = random.Random(0)
    for _ in range(3000):
        nd = rng.choice([4, 5])
        t = _random_strided(rng, nd)
        expected = suggest_memory_format(t) != torch.contiguous_format
        assert ops._strides_like_channels_last(t) == expected, (t.shape, t.stride())
        w = torch.empty((t.shape[1], 1) + (1,) * (nd - 2))  # never channels_last-like
        params = (nd - 2, (1,) * (nd - 2), (0,) * (nd - 2), (0,) * (nd - 2), (1,) * (nd - 2), 1)
        candidate = _C.prepare_forward(_kernels.describe(t), _kernels.describe(w), None, params, 1, 1, False)[2]
        assert candidate == expected, (t.shape, t.stride())
