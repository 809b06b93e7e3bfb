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
