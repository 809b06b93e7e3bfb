"""The weight re-layout kept per weight (convt._kernels._weight_cache).

CUDA forwards on the implicit-GEMM kernels pack the weight before they run; a forward
whose weight is unchanged (same storage, offset, strides and version counter) takes the
packing an earlier one kept. Checked here: kept and fresh packings give the same output
bit for bit, every in-place change of the weight (PyTorch ops, optimizer steps,
load_state_dict) is seen by the next forward, a change through ``.data`` is seen after
``convt.clear_weight_cache()``, entries go with their weights, CUDA-graph replays see
in-place changes, and ``CONVT_WEIGHT_CACHE=0`` turns it off. Oracle: PyTorch's own op.
"""

from __future__ import annotations

import gc

import pytest
import torch

import convt
from convt import _kernels
from conftest import rel_error, requires_convt_cuda


def test_weight_tag_follows_storage_offset_strides_and_version():
    w = torch.randn(4, 6, 3, 3)
    tag = _kernels._weight_tag(w, 7, 0)
    assert tag == _kernels._weight_tag(w, 7, 0)
    assert tag != _kernels._weight_tag(w, 8, 0)  # another layout
    assert tag != _kernels._weight_tag(w, 7, 1)  # another stream
    with torch.no_grad():
        w.mul_(2)
    assert tag != _kernels._weight_tag(w, 7, 0)  # version counter
    assert _kernels._weight_tag(w.transpose(2, 3), 7, 0) != _kernels._weight_tag(w, 7, 0)
    assert _kernels._weight_tag(w[1:], 7, 0) != _kernels._weight_tag(w, 7, 0)
    w.data = torch.randn(4, 6, 3, 3)
    assert _kernels._weight_tag(w, 7, 0)[0] != tag[0]  # another storage
    with torch.inference_mode():
        inf = torch.randn(2, 2)
    assert _kernels._weight_tag(inf, 7, 0) is None  # no version counter: nothing kept


def test_weight_cache_switch(monkeypatch):
    monkeypatch.delenv("CONVT_WEIGHT_CACHE", raising=False)
    assert _kernels.weight_cache_enabled()
    monkeypatch.setenv("CONVT_WEIGHT_CACHE", "0")
    assert not _kernels.weight_cache_enabled()
    assert convt.clear_weight_cache is _kernels.clear_weight_cache


def test_prepare_reports_no_relayout_on_the_cpu():
    x, w = torch.randn(2, 4, 5, 5), torch.randn(4, 6, 3, 3)
    prepared = _kernels._C.prepare_forward(
        _kernels.describe(x), _kernels.describe(w), None, (2, (2, 2), (1, 1), (0, 0), (1, 1), 1), 1, 0, True
    )
    assert prepared[4:] == (0, 0)


def _layer(dtype, kind="2d"):
    """A layer, its input and its prepare_forward parameters: a 2-D layer of 48 output
    channels (the output-stationary kernels), or a 1-D layer of 2 output channels and 128
    input channels, kernel 8 (GEMM and fold, whose packed weight holds every tap)."""
    torch.manual_seed(3)
    if kind == "fold":
        m = convt.nn.ConvTranspose1d(128, 2, 8, stride=4, padding=2).cuda().to(dtype)
        x = torch.randn(2, 128, 300, device="cuda", dtype=dtype)
        return m, x, (1, (4,), (2,), (0,), (1,), 1)
    m = convt.nn.ConvTranspose2d(32, 48, 3, stride=2, padding=1, output_padding=1).cuda().to(dtype)
    x = torch.randn(2, 32, 12, 14, device="cuda", dtype=dtype)
    return m, x, (2, (2, 2), (1, 1), (1, 1), (1, 1), 1)


def _reference(m, x):
    f = torch.nn.functional
    conv = f.conv_transpose1d if x.dim() == 3 else f.conv_transpose2d
    return conv(
        x.double(), m.weight.double(), m.bias.double(), stride=m.stride, padding=m.padding,
        output_padding=m.output_padding
    )


@requires_convt_cuda
@pytest.mark.parametrize("kind", ["2d", "fold"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_kept_packing_matches_and_sees_every_inplace_change(dtype, kind, monkeypatch):
    monkeypatch.delenv("CONVT_WEIGHT_CACHE", raising=False)
    convt.clear_weight_cache()
    budget = {torch.float32: 8e-4, torch.bfloat16: 1e-2, torch.float16: 1.5e-3}[dtype]
    m, x, params = _layer(dtype, kind)
    prepared = _kernels._C.prepare_forward(
        _kernels.describe(x), _kernels.describe(m.weight), _kernels.describe(m.bias),
        params, 0, 0, True,
    )
    if kind == "fold":
        what = convt.describe_forward(x, m.weight, m.bias, stride=4, padding=2)
        assert "GEMM and fold" in what, what
    if prepared[4] == 0:
        pytest.skip("this GPU runs the direct kernel here: no packing to keep")
    with torch.no_grad():
        y1 = m(x)
        assert id(m.weight) in _kernels._weight_cache
        y2 = m(x)  # the kept packing
        torch.testing.assert_close(y2, y1, rtol=0, atol=0)
        monkeypatch.setenv("CONVT_WEIGHT_CACHE", "0")
        torch.testing.assert_close(m(x), y1, rtol=0, atol=0)  # packed afresh, same output
        monkeypatch.delenv("CONVT_WEIGHT_CACHE")
        assert rel_error(y1, _reference(m, x)) <= budget

        # In-place changes: each bumps the version counter, and the next forward packs again.
        m.weight.add_(0.25)
        assert rel_error(m(x), _reference(m, x)) <= budget
        m.weight.copy_(torch.randn_like(m.weight))
        assert rel_error(m(x), _reference(m, x)) <= budget
        state = {k: torch.randn_like(v) for k, v in m.state_dict().items()}
    m.load_state_dict(state)
    with torch.no_grad():
        assert rel_error(m(x), _reference(m, x)) <= budget
    opt = torch.optim.SGD(m.parameters(), lr=0.5)
    m(x).float().square().mean().backward()
    opt.step()
    with torch.no_grad():
        assert rel_error(m(x), _reference(m, x)) <= budget

        # Through .data the version counter does not move: clear_weight_cache() is the way.
        before = m(x)
        m.weight.data.mul_(-1)
        convt.clear_weight_cache()
        after = m(x)
        assert rel_error(after, _reference(m, x)) <= budget
        assert rel_error(before, after) > 1e-2


@requires_convt_cuda
def test_entries_go_with_their_weights():
    convt.clear_weight_cache()
    m, x, _ = _layer(torch.float32)
    with torch.no_grad():
        m(x)
    n = len(_kernels._weight_cache)
    del m
    gc.collect()
    assert len(_kernels._weight_cache) == n - 1


@requires_convt_cuda
def test_graph_replays_see_inplace_weight_changes():
    convt.clear_weight_cache()
    m, x, _ = _layer(torch.float32)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(2):
            m(x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph):
        static_y = m(x)
    for scale in (1.0, -2.0):
        with torch.no_grad():
            m.weight.mul_(scale)
        graph.replay()
        torch.cuda.synchronize()
        with torch.no_grad():
            assert rel_error(static_y, _reference(m, x)) <= 8e-4


def test_cache_logic_with_the_run_stubbed(monkeypatch):
    """The keeping rules on the CPU, with the C++ run stubbed: which calls are told the kept
    packing is valid, into which buffer each packs, and when an entry goes."""
    monkeypatch.delenv("CONVT_WEIGHT_CACHE", raising=False)
    convt.clear_weight_cache()
    calls = []

    class FakeC:
        @staticmethod
        def run(call, out_ptr, out_strides, stream, ws_ptr, ws_bytes, cache_ptr=0, valid=False):
            calls.append((cache_ptr, valid))

    monkeypatch.setattr(_kernels, "_C", FakeC)
    out = torch.empty(1, 2, 5, 5)
    w = torch.randn(2, 2, 3, 3)

    def run(weight=w, nbytes=1000, key=42, stream=11, capturing=False):
        _kernels._launch_forward(None, out, stream, 0, 0, weight, nbytes, key, capturing)
        return calls[-1]

    first = run()
    assert first[1] is False and first[0] % 256 == 0  # packed into a new, aligned buffer
    assert run() == (first[0], True)  # unchanged: the kept packing
    with torch.no_grad():
        w.add_(1)  # version bumped: packed again, into the same buffer (same stream)
    assert run() == (first[0], False)
    assert run() == (first[0], True)
    assert run(key=43) == (first[0], False)  # another layout key
    other = run(stream=12)  # another stream: a buffer of its own
    assert other[1] is False and other[0] != first[0]
    assert run(stream=12) == (other[0], True)
    assert run(nbytes=0, key=0, stream=12) == (0, False)  # nothing to keep: no cache
    assert run(stream=12, capturing=True) == (0, False)  # captured: never the cache
    monkeypatch.setenv("CONVT_WEIGHT_CACHE", "0")
    assert run(stream=12) == (0, False)
    monkeypatch.delenv("CONVT_WEIGHT_CACHE")
    assert run(stream=12) == (other[0], True)
    w2 = torch.randn(2, 2, 3, 3)
    assert run(weight=w2)[1] is False
    assert id(w2) in _kernels._weight_cache
    del w2
    gc.collect()
    assert len(_kernels._weight_cache) == 1  # w's entry only
    convt.clear_weight_cache()
    assert run()[1] is False
    with torch.inference_mode():
        w3 = torch.randn(2, 2, 3, 3)
    assert run(weight=w3) == (0, False)  # no version counter: nothing kept
