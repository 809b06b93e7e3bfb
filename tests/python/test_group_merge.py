"""Narrow groups merged into one GEMM on the wgmma kernel (docs/kernels.md, "Narrow groups
merged into one GEMM"): in 16-bit types, groups of fewer than 16 input channels run several
at a time with a block-diagonal weight (CONVT_WG_GMERGE=0 keeps them apart); float32 keeps
its groups; groups of fewer than 8 input channels (depthwise), which have no tensor-core
plan of their own, are merged too in 2-D and 3-D layers unless CONVT_WG_GMERGE_SMALL=0 (or
where the merged plan would store every 4th element of the output's rows), and otherwise
run the direct kernel.
Results within the precision budget
against a float64 reference, and an infinite or NaN input stays in its own group's outputs
as in the float64 reference (a zero weight of another group times it must not leave a NaN
there). GPU only."""
import pytest
import torch
import torch.nn.functional as F

import convt

from conftest import rel_error, requires_convt_cuda

BUDGETS = {torch.float32: 8e-4, torch.bfloat16: 1e-2, torch.float16: 1.5e-3}

# (dims, batch, in channels, out channels, groups, input size, kernel, stride, padding,
# output padding, dilation)
NARROW = [
    (3, 2, 32, 32, 4, (5, 10, 20), (3, 5, 7), 2, (1, 2, 3), 1, 1),  # kb72-like
    (2, 4, 32, 64, 4, (24, 48), (3, 5), (2, 3), (1, 2), 0, (2, 1)),  # kb75-like
    (2, 4, 64, 32, 8, (24, 24), 4, 2, 1, 0, 1),  # eight groups of 8 -> 4
    (1, 4, 256, 256, 32, (300,), 16, 8, 4, 0, 1),  # 32 groups of 8 -> 8
]
SMALL = [
    (2, 4, 64, 64, 64, (24, 24), 4, 2, 1, 0, 1),  # depthwise (CenterNet-like)
    (3, 2, 16, 24, 8, (4, 8, 8), 3, 2, 1, 1, 1),  # groups of 2 -> 3
]
# 1-D depthwise layers: of stride 4, whose merged plan would store each W phase on its own,
# and of stride 2, whose merged plan runs with zeros inserted along W.
DEPTHWISE_1D = [
    (1, 4, 64, 64, 64, (4096,), 8, 4, 2, 0, 1),
    (1, 4, 64, 64, 64, (4096,), 4, 2, 1, 0, 1),
]


def _tensors(layer, dtype, seed):
    dims, n, cin, cout, g, size, k, s, p, op, d = layer
    ks = (k,) * dims if isinstance(k, int) else k
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, cin, *size, generator=gen)
    w = torch.randn(cin, cout // g, *ks, generator=gen) / (cin // g * len(ks)) ** 0.5
    b = torch.randn(cout, generator=gen)
    kw = dict(stride=s, padding=p, output_padding=op, groups=g, dilation=d)
    return dims, x, w, b, kw


def _run(dims, x, w, b, kw, dtype):
    xc, wc, bc = (t.to("cuda", dtype) for t in (x, w, b))
    what = convt.describe_forward(xc, wc, bc, **kw)
    y = getattr(convt, f"conv_transpose{dims}d")(xc, wc, bc, **kw)
    torch.cuda.synchronize()
    return what, y


def _reference(dims, x, w, b, kw):
    return getattr(F, f"conv_transpose{dims}d")(x.double(), w.double(), b.double(), **kw)


def _sm90():
    return torch.cuda.get_device_capability() == (9, 0)


@requires_convt_cuda
@pytest.mark.parametrize("dtype", list(BUDGETS), ids=str)
@pytest.mark.parametrize("layer", NARROW, ids=lambda l: f"{l[0]}d-{l[2]}-{l[3]}-g{l[4]}")
def test_narrow_groups_merged_or_not_match_float64(layer, dtype, monkeypatch):
    """The planner's choice (float32: never merged), none (CONVT_WG_GMERGE=0) and two
    groups merged (CONVT_WG_GMERGE=2), each within the budget."""
    if not _sm90():
        pytest.skip("groups are merged on the sm_90a wgmma kernel")
    dims, x, w, b, kw = _tensors(layer, dtype, 7 * layer[4] + layer[2])
    ref = _reference(dims, x, w, b, kw)
    for setting in ("", "0", "2"):
        if setting:
            monkeypatch.setenv("CONVT_WG_GMERGE", setting)
        else:
            monkeypatch.delenv("CONVT_WG_GMERGE", raising=False)
        what, y = _run(dims, x, w, b, kw, dtype)
        assert rel_error(y, ref) <= BUDGETS[dtype], (setting, what)
        if setting == "2":
            assert "groups merged 2 at a time" in what, what
        elif setting == "0" or dtype == torch.float32:
            assert "groups merged" not in what, what


@requires_convt_cuda
@pytest.mark.parametrize("dtype", list(BUDGETS), ids=str)
@pytest.mark.parametrize("layer", SMALL, ids=lambda l: f"{l[0]}d-{l[2]}-{l[3]}-g{l[4]}")
def test_small_groups_merged_unless_off(layer, dtype, monkeypatch):
    if not _sm90():
        pytest.skip("groups are merged on the sm_90a wgmma kernel")
    monkeypatch.delenv("CONVT_WG_GMERGE", raising=False)
    monkeypatch.delenv("CONVT_WG_GMERGE_SMALL", raising=False)
    dims, x, w, b, kw = _tensors(layer, dtype, 11 * layer[4] + layer[2])
    ref = _reference(dims, x, w, b, kw)
    what, y = _run(dims, x, w, b, kw, dtype)
    assert "groups merged" in what, what
    assert rel_error(y, ref) <= BUDGETS[dtype]
    monkeypatch.setenv("CONVT_WG_GMERGE_SMALL", "0")
    what, y = _run(dims, x, w, b, kw, dtype)
    assert what.startswith("direct kernel"), what
    assert rel_error(y, ref) <= BUDGETS[dtype]


@requires_convt_cuda
@pytest.mark.parametrize("dtype", list(BUDGETS), ids=str)
@pytest.mark.parametrize("layer", DEPTHWISE_1D, ids=lambda l: f"k{l[6]}-s{l[7]}")
def test_1d_depthwise_keeps_the_direct_kernel(layer, dtype, monkeypatch):
    """The direct kernel runs 1-D depthwise layers (faster there than their merged plans);
    forced (CONVT_WG_GMERGE=16 in float32, 32 in 16-bit types: 32 -> 32 float32 groups take
    another kernel), the merged plan; both within the budget."""
    if not _sm90():
        pytest.skip("groups are merged on the sm_90a wgmma kernel")
    monkeypatch.delenv("CONVT_WG_GMERGE", raising=False)
    monkeypatch.delenv("CONVT_WG_GMERGE_SMALL", raising=False)
    dims, x, w, b, kw = _tensors(layer, dtype, 5)
    ref = _reference(dims, x, w, b, kw)
    what, y = _run(dims, x, w, b, kw, dtype)
    assert what.startswith("direct kernel"), what
    assert rel_error(y, ref) <= BUDGETS[dtype]
    merge = "16" if dtype == torch.float32 else "32"
    monkeypatch.setenv("CONVT_WG_GMERGE", merge)
    what, y = _run(dims, x, w, b, kw, dtype)
    assert f"groups merged {merge} at a time" in what, what
    assert rel_error(y, ref) <= BUDGETS[dtype]


@requires_convt_cuda
@pytest.mark.parametrize("dtype", list(BUDGETS), ids=str)
@pytest.mark.parametrize("layer,merge", [(NARROW[0], "2"), (NARROW[1], "4"), (SMALL[0], "16"),
                                          (SMALL[1], "4")],
                         ids=["kb72-like", "kb75-like", "depthwise", "2-to-3"])
def test_non_finite_inputs_stay_in_their_groups(layer, merge, dtype, monkeypatch):
    if not _sm90():
        pytest.skip("groups are merged on the sm_90a wgmma kernel")
    monkeypatch.setenv("CONVT_WG_GMERGE", merge)
    dims, x, w, b, kw = _tensors(layer, dtype, 99)
    cig = x.shape[1] // kw["groups"]
    x[0, cig].view(-1)[3] = float("inf")  # the second group's first channel
    x[1, 2 * cig].view(-1)[5] = float("nan")  # the third group's
    ref = _reference(dims, x, w, b, kw)
    what, y = _run(dims, x, w, b, kw, dtype)
    assert f"groups merged {merge} at a time" in what, what
    y = y.double().cpu()
    assert torch.equal(torch.isnan(y), torch.isnan(ref))
    assert torch.equal(torch.isinf(y), torch.isinf(ref))
    cog = ref.shape[1] // kw["groups"]
    assert torch.isfinite(ref[:, :cog]).all()  # the first group's outputs
    finite = torch.isfinite(ref)
    assert torch.equal(y[torch.isinf(ref)], ref[torch.isinf(ref)])
    scale = ref[finite].abs().max().item()
    assert (y[finite] - ref[finite]).abs().max().item() <= BUDGETS[dtype] * scale


def _fuzzed_small_group_layers(count, seed):
    """2-D and 3-D layers of 1, 2 or 4 input channels a group (8-64 groups), random kernel,
    stride, padding, dilation and output padding, each with a layout (channels_last or not)
    and a bias or none."""
    import random

    rng = random.Random(seed)
    layers = []
    while len(layers) < count:
        dims = rng.choice((2, 2, 3))
        cig, cog = rng.choice((1, 1, 2, 4)), rng.choice((1, 2, 3, 4))
        g = rng.choice((8, 16, 32, 48, 64))
        size = tuple(rng.randint(3, 8) for _ in range(dims - 2)) + tuple(rng.randint(8, 40) for _ in range(2))
        k = tuple(rng.randint(1, 5) for _ in range(dims))
        s = tuple(rng.randint(1, 3) for _ in range(dims))
        d = tuple(rng.choice((1, 1, 2)) for _ in range(dims))
        p = tuple(rng.randint(0, di * (ki - 1)) for di, ki in zip(d, k))
        op = tuple(rng.randint(0, max(si, di) - 1) for si, di in zip(s, d))
        out = [(i - 1) * si - 2 * pi + di * (ki - 1) + oi + 1 for i, si, pi, di, ki, oi in zip(size, s, p, d, k, op)]
        if min(out) < 1:
            continue
        layers.append(((dims, rng.choice((1, 2)), cig * g, cog * g, g, size, k, s, p, op, d),
                       rng.random() < 0.5, rng.random() < 0.8))
    return layers


FUZZED = _fuzzed_small_group_layers(24, seed=2027)


@requires_convt_cuda
@pytest.mark.parametrize("dtype", list(BUDGETS), ids=str)
@pytest.mark.parametrize("fuzzed", FUZZED, ids=lambda f: "{0}d-{2}-{3}-g{4}-k{6}-s{7}-p{8}-op{9}-d{10}".format(*f[0]))
def test_fuzzed_small_groups_match_float64(fuzzed, dtype):
    """Whatever runs them (groups merged on the wgmma kernel or the direct kernel): within
    the budget against float64, in PyTorch's output layout."""
    layer, channels_last, bias = fuzzed
    dims, x, w, b, kw = _tensors(layer, dtype, 31 * layer[4] + layer[2])
    if not bias:
        b = None
    fmt = {2: torch.channels_last, 3: torch.channels_last_3d}[dims]
    xc, wc = x.to("cuda", dtype), w.to("cuda", dtype)
    if channels_last:
        xc = xc.to(memory_format=fmt)
    bc = None if b is None else b.to("cuda", dtype)
    what = convt.describe_forward(xc, wc, bc, **kw)
    y = getattr(convt, f"conv_transpose{dims}d")(xc, wc, bc, **kw)
    torch_y = getattr(F, f"conv_transpose{dims}d")(xc, wc, bc, **kw)
    torch.cuda.synchronize()
    assert y.shape == torch_y.shape and y.stride() == torch_y.stride(), what
    ref = getattr(F, f"conv_transpose{dims}d")(x.double(), w.double(), None if b is None else b.double(), **kw)
    assert rel_error(y, ref) <= BUDGETS[dtype], what


@requires_convt_cuda
def test_fuzzed_small_groups_mostly_merged():
    """The fuzzed layers above do exercise the merged plans: on sm_90a a good part of them
    run with their groups merged in bfloat16 (13 of the 24 by the planner tool, which plans
    for an sm_90a device without one; a third at least here), the rest on the direct
    kernel."""
    if not _sm90():
        pytest.skip("groups are merged on the sm_90a wgmma kernel")
    merged = 0
    for layer, _, _ in FUZZED:
        dims, x, w, b, kw = _tensors(layer, torch.bfloat16, 1)
        what = convt.describe_forward(x.cuda().bfloat16(), w.cuda().bfloat16(), b.cuda().bfloat16(), **kw)
        assert "groups merged" in what or what.startswith("direct kernel"), what
        merged += "groups merged" in what
    assert merged >= len(FUZZED) // 3, merged
