"""Layers of 1 to 7 input channels a group with several output channels (an image's 3
channels into 16 or 64, 1-4 channel stems, narrow groups): the CUDA direct forward takes
several output channels a thread against a shared-memory table of the weights
(docs/kernels.md, "Several output channels a thread"; CONVT_DIRECT_CHANNELS=0 runs the kernel
by rows instead). Fuzzed layers through the functional API and the nn modules, every
precision, PyTorch's output layout, within the budget against float64; the two forms give
the same bits; and the wgmma plans of such layers with groups of one, their channels padded
to the K step (by default for layers of 16 or more multiply-adds an output, wherever the
box fits with CONVT_WG_FEW=1). GPU only."""
import random

import pytest
import torch
import torch.nn.functional as F

import convt

from conftest import layer_tensors, rel_error, requires_convt_cuda

BUDGETS = {torch.float32: 8e-4, torch.bfloat16: 1e-2, torch.float16: 1.5e-3,
           torch.float64: 1e-12}


def _fuzzed_layers(count, seed):
    """(dims, batch, in, out, groups, size, kernel, stride, padding, output padding,
    dilation), channels_last, bias: 1-7 input channels a group, 3-40 output channels a
    group, 1-D to 3-D, strides, padding, dilation and output padding as PyTorch allows."""
    rng = random.Random(seed)
    layers = []
    while len(layers) < count:
        dims = rng.choice((1, 2, 2, 3, 3))
        g = rng.choice((1, 1, 1, 2, 3))
        cig, cog = rng.randint(1, 7), rng.randint(3, 40)
        size = tuple(rng.randint(2, {1: 300, 2: 24, 3: 9}[dims]) for _ in range(dims))
        k = tuple(rng.randint(1, 5) for _ in range(dims))
        s = tuple(rng.randint(1, 3) for _ in range(dims))
        d = tuple(rng.choice((1, 1, 2)) for _ in range(dims))
        p = tuple(rng.randint(0, (ki - 1) * di) for ki, di in zip(k, d))
        op = tuple(rng.randint(0, max(si, di) - 1) for si, di in zip(s, d))
        out = [(n - 1) * si - 2 * pi + di * (ki - 1) + oi + 1
               for n, si, pi, di, ki, oi in zip(size, s, p, d, k, op)]
        if min(out) < 1:
            continue
        layers.append(((dims, rng.choice((1, 2, 4)), cig * g, cog * g, g, size, k, s, p, op, d),
                       dims > 1 and rng.random() < 0.4, rng.random() < 0.7))
    return layers


FUZZED = _fuzzed_layers(24, seed=327)


def _layer_id(f):
    return "{0}d-{2}-{3}-g{4}-k{6}-s{7}-p{8}-op{9}-d{10}".format(*f[0])


def _on_cuda(x, w, b, dtype, channels_last):
    xc, wc = x.to("cuda", dtype), w.to("cuda", dtype)
    if channels_last:
        xc = xc.to(memory_format={2: torch.channels_last, 3: torch.channels_last_3d}[x.dim() - 2])
    return xc, wc, None if b is None else b.to("cuda", dtype)


@requires_convt_cuda
@pytest.mark.parametrize("dtype", list(BUDGETS), ids=str)
@pytest.mark.parametrize("fuzzed", FUZZED, ids=_layer_id)
def test_fuzzed_few_channel_layers_match_float64(fuzzed, dtype):
    """Within the budget against float64, in the output layout PyTorch's own op gives."""
    layer, channels_last, bias = fuzzed
    dims, x, w, b, kw = layer_tensors(layer, bias, 13 * layer[2] + layer[3])
    xc, wc, bc = _on_cuda(x, w, b, dtype, channels_last)
    what = convt.describe_forward(xc, wc, bc, **kw)
    y = getattr(convt, f"conv_transpose{dims}d")(xc, wc, bc, **kw)
    torch_y = getattr(F, f"conv_transpose{dims}d")(xc, wc, bc, **kw)
    torch.cuda.synchronize()
    assert y.shape == torch_y.shape and y.stride() == torch_y.stride(), what
    ref = getattr(F, f"conv_transpose{dims}d")(x.double(), w.double(),
                                               None if b is None else b.double(), **kw)
    assert rel_error(y, ref) <= BUDGETS[dtype], what


@requires_convt_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
@pytest.mark.parametrize("fuzzed", FUZZED[:12], ids=_layer_id)
def test_output_channels_a_thread_give_the_rows_kernels_bits(fuzzed, dtype, monkeypatch):
    """Where the direct kernel runs, several output channels a thread (the default, and each
    kCo asked for) and the kernel by rows (CONVT_DIRECT_CHANNELS=0) sum the same products in
    the same order: the same bits."""
    layer, channels_last, bias = fuzzed
    dims, x, w, b, kw = layer_tensors(layer, bias, 3 * layer[3])
    xc, wc, bc = _on_cuda(x, w, b, dtype, channels_last)
    op = getattr(convt, f"conv_transpose{dims}d")
    if not convt.describe_forward(xc, wc, bc, **kw).startswith("direct kernel"):
        pytest.skip("the implicit GEMM runs this layer")
    monkeypatch.setenv("CONVT_DIRECT_CHANNELS", "0")
    rows = op(xc, wc, bc, **kw)
    for setting in ("", "4", "8", "16"):
        monkeypatch.setenv("CONVT_DIRECT_CHANNELS", setting)
        assert torch.equal(op(xc, wc, bc, **kw), rows), setting


@requires_convt_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("fuzzed", [f for f in FUZZED if f[0][4] == 1], ids=_layer_id)
def test_padded_channels_on_wgmma_match_float64(fuzzed, dtype, monkeypatch):
    """With CONVT_WG_FEW=1, layers of groups of one run on the wgmma kernel with their input
    channels padded to the K step (where its box fits; on GPUs without wgmma the direct
    kernel): within the budget against float64, in PyTorch's output layout."""
    layer, channels_last, bias = fuzzed
    dims, x, w, b, kw = layer_tensors(layer, bias, 7 * layer[2] + layer[3])
    xc, wc, bc = _on_cuda(x, w, b, dtype, channels_last)
    monkeypatch.setenv("CONVT_WG_FEW", "1")
    what = convt.describe_forward(xc, wc, bc, **kw)
    if torch.cuda.get_device_capability() == (9, 0) and what.startswith("implicit-GEMM"):
        assert f"{layer[2]} input channels padded to" in what, what
    y = getattr(convt, f"conv_transpose{dims}d")(xc, wc, bc, **kw)
    torch_y = getattr(F, f"conv_transpose{dims}d")(xc, wc, bc, **kw)
    torch.cuda.synchronize()
    assert y.shape == torch_y.shape and y.stride() == torch_y.stride(), what
    ref = getattr(F, f"conv_transpose{dims}d")(x.double(), w.double(),
                                               None if b is None else b.double(), **kw)
    assert rel_error(y, ref) <= BUDGETS[dtype], what


@requires_convt_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_rgb_modules_match_pytorch(dtype):
    """nn.ConvTranspose2d/3d layers of 3 -> 16 channels on a batch of images and volumes (k3
    s2 p1, output_padding 1) through convt's modules: the direct kernel, within the budget
    of PyTorch's own module against float64, the description naming the kernel's form."""
    torch.manual_seed(0)
    for dims, size in ((2, (32, 32)), (3, (8, 16, 16))):
        ref_mod = getattr(torch.nn, f"ConvTranspose{dims}d")(3, 16, 3, stride=2, padding=1,
                                                             output_padding=1)
        mod = getattr(convt.nn, f"ConvTranspose{dims}d")(3, 16, 3, stride=2, padding=1,
                                                         output_padding=1)
        mod.load_state_dict(ref_mod.state_dict())
        x = torch.randn(16, 3, *size)
        ref = ref_mod.double()(x.double())
        mod = mod.to("cuda", dtype)
        xc = x.to("cuda", dtype)
        what = convt.describe_forward(xc, mod.weight, mod.bias, stride=2, padding=1,
                                      output_padding=1)
        assert what.startswith("direct kernel, chunks of ") and "output channels a thread" in what
        with torch.no_grad():
            y = mod(xc)
        assert y.shape == ref.shape
        assert rel_error(y, ref) <= BUDGETS[dtype]


@requires_convt_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_dense_few_channel_layers_take_wgmma_by_default(dtype, monkeypatch):
    """A 3-D 3 -> 16 layer of kernel 3, stride 1 (81 multiply-adds an output) and a 1-D
    7 -> 50 layer of kernel 5 (35): by default on the wgmma kernel with their 3 and 7 input
    channels padded (on GPUs with wgmma), on the direct kernel with CONVT_WG_FEW=0, both
    within the budget against float64; a 3-D k3 s2 layer (10 an output) stays on the direct
    kernel."""
    gen = torch.Generator().manual_seed(5)
    cases = [((2, 3, 6, 12, 12), (3, 16, 3, 3, 3), {}),
             ((4, 7, 300), (7, 50, 5), {"padding": 4}),
             ((2, 3, 6, 12, 12), (3, 16, 3, 3, 3), {"stride": 2, "padding": 1})]
    wgmma = torch.cuda.get_device_capability() == (9, 0)
    for i, (xs, ws, kw) in enumerate(cases):
        x = torch.randn(*xs, generator=gen)
        w = torch.randn(*ws, generator=gen) / (ws[0] * len(ws[2:])) ** 0.5
        b = torch.randn(ws[1], generator=gen)
        xc, wc, bc = (t.to("cuda", dtype) for t in (x, w, b))
        op = getattr(convt, f"conv_transpose{len(xs) - 2}d")
        ref = getattr(F, f"conv_transpose{len(xs) - 2}d")(x.double(), w.double(), b.double(),
                                                           **kw)
        monkeypatch.delenv("CONVT_WG_FEW", raising=False)
        what = convt.describe_forward(xc, wc, bc, **kw)
        if i < 2 and wgmma:
            assert what.startswith("implicit-GEMM wgmma persistent"), what
            assert f"{xs[1]} input channels padded to" in what, what
        else:
            assert what.startswith("direct kernel"), what
        assert rel_error(op(xc, wc, bc, **kw), ref) <= BUDGETS[dtype], what
        monkeypatch.setenv("CONVT_WG_FEW", "0")
        what = convt.describe_forward(xc, wc, bc, **kw)
        assert what.startswith("direct kernel"), what
        assert rel_error(op(xc, wc, bc, **kw), ref) <= BUDGETS[dtype], what
