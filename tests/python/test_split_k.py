"""Split K on the wgmma kernel (CONVT_WG_SPLIT_K; docs/kernels.md, "Layers of a few tiles at
batch 1"): deep layers at batch 1 whose few tiles would leave most of the GPU idle split
each tile's K steps over several blocks (by default; CONVT_WG_SPLIT_K=0 turns it off). The results stay within the precision
budget against a float64 reference, and are the same bit for bit from call to call (the
parts' sums are added in part order whichever part finishes last). GPU only."""
import pytest
import torch
import torch.nn.functional as F

import convt

from conftest import rel_error, requires_convt_cuda

BUDGETS = {torch.float32: 8e-4, torch.bfloat16: 1e-2, torch.float16: 1.5e-3}

# (input channels, output channels, input size, kernel, stride, padding): DeconvNet-like and
# pix2pix-like layers at batch 1 (a few tiles of many K steps each).
LAYERS = [
    (512, 128, (14, 14), 3, 1, 1),
    (1024, 512, (4, 4), 4, 2, 1),
    (256, 64, (5, 6), 4, 2, 1),
]


@requires_convt_cuda
@pytest.mark.parametrize("dtype", list(BUDGETS), ids=str)
@pytest.mark.parametrize("layer", LAYERS, ids=lambda l: f"{l[0]}-{l[1]}-k{l[3]}s{l[4]}")
@pytest.mark.parametrize("parts", ["default", "5"])
def test_split_k_matches_float64_and_repeats_exactly(layer, dtype, parts, monkeypatch):
    if parts == "default":
        monkeypatch.delenv("CONVT_WG_SPLIT_K", raising=False)
    else:
        monkeypatch.setenv("CONVT_WG_SPLIT_K", parts)
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("split K is a mode of the sm_90a wgmma kernel")
    cin, cout, size, k, s, p = layer
    gen = torch.Generator().manual_seed(cin + cout)
    x = torch.randn(1, cin, *size, generator=gen)
    w = torch.randn(cin, cout, k, k, generator=gen) / (cin * k) ** 0.5
    b = torch.randn(cout, generator=gen)
    ref = F.conv_transpose2d(x.double(), w.double(), b.double(), stride=s, padding=p)
    xc, wc, bc = (t.to("cuda", dtype) for t in (x, w, b))
    what = convt.describe_forward(xc, wc, bc, stride=s, padding=p)
    if "wgmma persistent" not in what:
        pytest.skip(f"the dispatcher runs another kernel here: {what}")
    assert "K steps split in" in what, what
    y1 = convt.conv_transpose2d(xc, wc, bc, stride=s, padding=p)
    y2 = convt.conv_transpose2d(xc, wc, bc, stride=s, padding=p)
    torch.cuda.synchronize()
    assert torch.equal(y1, y2)
    assert rel_error(y1, ref) <= BUDGETS[dtype]


@requires_convt_cuda
def test_split_k_off_keeps_whole_tiles(monkeypatch):
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("split K is a mode of the sm_90a wgmma kernel")
    cin, cout, size, k, s, p = LAYERS[0]
    x = torch.randn(1, cin, *size, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(cin, cout, k, k, device="cuda", dtype=torch.bfloat16)
    monkeypatch.delenv("CONVT_WG_SPLIT_K", raising=False)
    what = convt.describe_forward(x, w, None, stride=s, padding=p)
    if "wgmma persistent" not in what:
        pytest.skip(f"the dispatcher runs another kernel here: {what}")
    assert "K steps split in" in what, what
    monkeypatch.setenv("CONVT_WG_SPLIT_K", "0")
    what = convt.describe_forward(x, w, None, stride=s, padding=p)
    assert "wgmma persistent" in what and "K steps split in" not in what, what
