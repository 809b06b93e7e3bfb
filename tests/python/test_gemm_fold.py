"""Layers of 1 to 4 output channels a group (the last layers of generators and decoders) and
GEMM and fold (docs/kernels.md, "GEMM and fold"): one GEMM over the input's positions for
every (output channel, tap), then the fold of its products into the output. Fuzzed layers
and published ones through the functional API, every precision, within the budget against
float64, by default and with GEMM and fold forced in each of its forms (the mma.sync gather
GEMM with CONVT_GEMM_FOLD_PIPE=0, the cp.async GEMM with CONVT_GEMM_FOLD_FUSED=0, the fold
in that GEMM's epilogue); which layers the dispatcher gives it; the nn modules' output
against PyTorch's own op on the GPU. GPU only."""
import random

import pytest
import torch
import torch.nn.functional as F

import convt

from conftest import layer_tensors, rel_error, requires_convt_cuda

BUDGETS = {"fp32": 8e-4, "fp32-strict": 4e-6, "bf16": 1e-2, "fp16": 1.5e-3}
DTYPES = {"fp32": torch.float32, "fp32-strict": torch.float32, "bf16": torch.bfloat16,
          "fp16": torch.float16}
FUNCS = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}
CONVT_FUNCS = {1: convt.conv_transpose1d, 2: convt.conv_transpose2d, 3: convt.conv_transpose3d}
# (CONVT_GEMM_FOLD, CONVT_GEMM_FOLD_PIPE, CONVT_GEMM_FOLD_FUSED)
FORMS = {"default": ("", "", ""), "forced": ("1", "0", "0"), "pipe": ("1", "1", "0"),
         "fused": ("1", "1", "1")}


def _fuzzed_layers(count, seed):
    """(dims, batch, in, out, groups, size, kernel, stride, padding, output padding,
    dilation), bias: 100-300 input and 1-4 output channels a group, 1-D to 3-D, sizes of a
    multiple of 8 positions a plane for one layer in two (where the cp.async GEMM runs)."""
    rng = random.Random(seed)
    layers = []
    while len(layers) < count:
        dims = rng.choice((1, 1, 2, 3))
        g = rng.choice((1, 1, 2))
        cig, cog = rng.randint(100, 300), rng.randint(1, 4)
        size = [rng.randint(2, {1: 200, 2: 20, 3: 7}[dims]) for _ in range(dims)]
        if rng.random() < 0.5:
            size[-1] = max(8, size[-1] // 8 * 8)
        k = tuple(rng.randint(1, {1: 16, 2: 5, 3: 3}[dims]) for _ in range(dims))
        s = tuple(rng.randint(1, 4) for _ in range(dims))
        d = tuple(rng.choice((1, 1, 2)) for _ in range(dims))
        p = tuple(rng.randint(0, (ki - 1) * di) for ki, di in zip(k, d))
        op = tuple(rng.randint(0, max(si, di) - 1) for si, di in zip(s, d))
        out = [(n - 1) * si - 2 * pi + di * (ki - 1) + oi + 1
               for n, si, pi, di, ki, oi in zip(size, s, p, d, k, op)]
        if min(out) < 1:
            continue
        layers.append(((dims, rng.choice((1, 2, 3)), cig * g, cog * g, g, tuple(size), k, s, p,
                        op, d), rng.random() < 0.7))
    return layers


FUZZED = _fuzzed_layers(16, seed=4953)

# Published last layers: (name, layer as above, bias, whether the dispatcher takes GEMM and
# fold for it in float32 with TF32 and in bfloat16).
PUBLISHED = [
    ("convtasnet_dec", (1, 2, 512, 1, 1, (999,), (16,), (8,), (0,), (0,), (1,)), False, True),
    ("pix2pix_out", (2, 1, 128, 3, 1, (32, 32), (4, 4), (2, 2), (1, 1), (0, 0), (1, 1)), True,
     True),
    ("wavegan_out", (1, 2, 64, 1, 1, (1024,), (25,), (4,), (11,), (1,), (1,)), True, False),
    ("fsrcnn_x3", (2, 1, 56, 1, 1, (40, 40), (9, 9), (3, 3), (3, 3), (2, 2), (1, 1)), True,
     False),
    ("dcgan_out", (2, 4, 64, 3, 1, (32, 32), (4, 4), (2, 2), (1, 1), (0, 0), (1, 1)), False,
     False),
]


def _layer_id(f):
    return "{0}d-{2}-{3}-g{4}-{5}-k{6}-s{7}-p{8}-op{9}-d{10}".format(*f[0])


def _check(layer, bias, mode, form, monkeypatch, seed):
    """convt's output within the mode's budget against float64; returns its description."""
    for var, value in zip(("CONVT_GEMM_FOLD", "CONVT_GEMM_FOLD_PIPE", "CONVT_GEMM_FOLD_FUSED"),
                          FORMS[form]):
        if value:
            monkeypatch.setenv(var, value)
        else:
            monkeypatch.delenv(var, raising=False)
    dims, x, w, b, kw = layer_tensors(layer, bias, seed)
    ref = FUNCS[dims](x.double(), w.double(), None if b is None else b.double(), **kw)
    dtype = DTYPES[mode]
    xc, wc = x.to("cuda", dtype), w.to("cuda", dtype)
    bc = None if b is None else b.to("cuda", dtype)
    saved = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = mode != "fp32-strict"
    try:
        what = convt.describe_forward(xc, wc, bc, **kw)
        y = CONVT_FUNCS[dims](xc, wc, bc, **kw)
    finally:
        torch.backends.cudnn.allow_tf32 = saved
    assert y.dtype == dtype and y.shape == ref.shape
    err = rel_error(y.double().cpu(), ref)
    assert err <= BUDGETS[mode], f"{what}: error {err:.3g}"
    return what


@requires_convt_cuda
@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("mode", list(BUDGETS))
@pytest.mark.parametrize("fuzzed", FUZZED, ids=_layer_id)
def test_fuzzed_few_output_layers_match_float64(fuzzed, mode, form, monkeypatch):
    """Within the budget against float64 by default and in every forced form of GEMM and
    fold, which runs wherever it is forced."""
    layer, bias = fuzzed
    what = _check(layer, bias, mode, form, monkeypatch, 7 * layer[2] + layer[3])
    if form != "default":
        assert "GEMM and fold" in what, what


@requires_convt_cuda
@pytest.mark.parametrize("mode", ["fp32", "bf16"])
@pytest.mark.parametrize("published", PUBLISHED, ids=lambda p: p[0])
def test_published_last_layers_dispatch_and_match(published, mode, monkeypatch):
    """The dispatcher's choice for published last layers (GEMM and fold for Conv-TasNet's
    decoder and pix2pix's output layer, the other kernels for the shallower ones), each
    within the budget against float64."""
    _, layer, bias, taken = published
    what = _check(layer, bias, mode, "default", monkeypatch, 11)
    assert ("GEMM and fold" in what) == taken, what


@requires_convt_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_module_matches_pytorch_on_the_gpu(dtype):
    """convt.nn.ConvTranspose1d of a decoder's last layer, run as GEMM and fold, against
    PyTorch's own module with the same parameters on the GPU."""
    torch.manual_seed(5)
    ref = torch.nn.ConvTranspose1d(256, 2, 16, stride=8, padding=4).to("cuda", dtype)
    m = convt.nn.ConvTranspose1d(256, 2, 16, stride=8, padding=4).to("cuda", dtype)
    m.load_state_dict(ref.state_dict())
    x = torch.randn(3, 256, 777, device="cuda", dtype=dtype)
    assert "GEMM and fold" in convt.describe_forward(x, m.weight, m.bias, stride=8, padding=4)
    with torch.no_grad():
        y, y_ref = m(x), ref(x)
    budget = 2 * (8e-4 if dtype == torch.float32 else 1e-2)
    assert rel_error(y.double(), y_ref.double()) <= budget
