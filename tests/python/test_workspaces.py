"""Workspaces kept per (device, stream) for the next CUDA call (convt._kernels._workspace).

A call's workspace is used only by the kernels it enqueues on its stream, so the next call
on that stream may take the same memory. Checked here: the keeping rules (per device and
stream, replaced by a larger one, never inside a CUDA-graph capture, never above 32 MiB,
dropped by ``convt.release_workspaces()``), and on a GPU that layers of different
workspace sizes called back to back on one stream, on two streams, and around a CUDA-graph
capture and its replays all give PyTorch's results. Oracle: PyTorch's own op.
"""

from __future__ import annotations

import pytest
import torch

import convt
from convt import _kernels
from conftest import rel_error, requires_convt_cuda


@pytest.fixture(autouse=True)
def _fresh_workspaces():
    convt.release_workspaces()
    yield
    convt.release_workspaces()


@pytest.mark.skipif(not _kernels._KEEP_WORKSPACE, reason="CONVT_KEEP_WORKSPACE=0 in the environment")
def test_keeping_rules():
    like = torch.empty(1)
    a = _kernels._workspace(1000, like, 0, 11, False)
    assert a[1] % 256 == 0 and a[2] >= 1000 and a[0].numel() >= a[2] + 256
    assert _kernels._workspace(5000, like, 0, 11, False) is a  # fits the kept one
    b = _kernels._workspace(1000, like, 0, 12, False)  # another stream
    c = _kernels._workspace(1000, like, 1, 11, False)  # another device
    assert b is not a and c is not a and b[1] != a[1] and c[1] != a[1]
    big = _kernels._workspace(a[2] + 1, like, 0, 11, False)  # larger: replaces it
    assert big is not a and big[2] > a[2]
    assert _kernels._workspace(10, like, 0, 11, False) is big
    captured = _kernels._workspace(10, like, 0, 11, True)  # inside a capture: a fresh one
    assert captured is not big and captured[2] == 10
    assert _kernels._workspace(10, like, 0, 11, False) is big
    huge = (32 << 20) + 1  # above the bound: allocated per call, not kept
    h1 = _kernels._workspace(huge, like, 0, 13, False)
    h2 = _kernels._workspace(huge, like, 0, 13, False)
    assert h1[2] == huge and h1[0] is not h2[0]
    assert (0, 13) not in _kernels._workspaces
    convt.release_workspaces()
    assert not _kernels._workspaces
    assert _kernels._workspace(10, like, 0, 11, False) is not big


def test_release_workspaces_is_exported():
    assert convt.release_workspaces is _kernels.release_workspaces
    assert "release_workspaces" in convt.__all__


_LAYERS = [  # (dims, in, out, size, kernel, stride, padding, output_padding, groups): workspaces of several sizes
    (2, 32, 48, (12, 14), 3, 2, 1, 1, 1),
    (2, 64, 64, (40, 56), 3, 1, 1, 0, 1),
    (3, 16, 8, (6, 10, 12), 3, 2, 1, 1, 1),
    (1, 64, 32, (300,), 5, 1, 2, 0, 1),
    (2, 48, 48, (20, 20), 4, 2, 1, 0, 4),
]


def _make(layer, dtype, device="cuda"):
    dims, cin, cout, size, k, s, p, op, g = layer
    x = torch.randn(2, cin, *size, device=device, dtype=dtype)
    w = torch.randn(cin, cout // g, *([k] * dims), device=device, dtype=dtype) / (cin * k**dims) ** 0.5
    b = torch.randn(cout, device=device, dtype=dtype)
    kw = dict(stride=s, padding=p, output_padding=op, groups=g)
    return dims, x, w, b, kw


def _workspace_bytes(dims, x, w, b, kw):
    """The workspace the forward asks for (prepare_forward)."""
    params = (dims, (kw["stride"],) * dims, (kw["padding"],) * dims, (kw["output_padding"],) * dims,
              (1,) * dims, kw["groups"])
    math = _kernels.cuda_math_mode() if x.dtype is torch.float32 else 0
    prepared = _kernels._C.prepare_forward(_kernels.describe(x), _kernels.describe(w), _kernels.describe(b),
                                           params, math, 0, True)
    return prepared[3]


def _reference(dims, x, w, b, kw):
    fn = getattr(torch.nn.functional, f"conv_transpose{dims}d")
    return fn(x.double(), w.double(), b.double(), **kw)


_BUDGET = {torch.float32: 8e-4, torch.bfloat16: 1e-2, torch.float16: 1.5e-3}


@requires_convt_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_layers_back_to_back_on_one_stream(dtype):
    cases = [_make(layer, dtype) for layer in _LAYERS]
    needed = max(_workspace_bytes(*c) for c in cases)
    outs = []
    with torch.no_grad():
        for _ in range(3):  # no synchronisation between the calls
            for dims, x, w, b, kw in cases:
                outs.append(getattr(convt, f"conv_transpose{dims}d")(x, w, b, **kw))
    torch.cuda.synchronize()
    if _kernels._KEEP_WORKSPACE and needed:
        kept = _kernels._workspaces[(0, torch.cuda.current_stream().cuda_stream)]
        assert kept[2] >= needed  # grown to the largest of the layers'
    for i, y in enumerate(outs):
        dims, x, w, b, kw = cases[i % len(cases)]
        assert rel_error(y, _reference(dims, x, w, b, kw)) <= _BUDGET[dtype]


@requires_convt_cuda
def test_two_streams_and_a_graph():
    dtype = torch.float32
    cases = [_make(layer, dtype) for layer in _LAYERS[:3]]
    refs = [_reference(*c) for c in cases]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    outs = []
    with torch.no_grad():
        for _ in range(2):
            for dims, x, w, b, kw in cases:
                op = getattr(convt, f"conv_transpose{dims}d")
                outs.append(op(x, w, b, **kw))
                with torch.cuda.stream(side):
                    outs.append(op(x, w, b, **kw))
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    for i, y in enumerate(outs):
        assert rel_error(y, refs[(i // 2) % len(cases)]) <= _BUDGET[dtype]
    # A capture between eager calls: the graph's workspace is its own, so eager calls on
    # the capturing stream afterwards (kept workspace) do not disturb its replays.
    dims, x, w, b, kw = cases[1]
    op = getattr(convt, f"conv_transpose{dims}d")
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad():
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            op(x, w, b, **kw)
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(graph):
            static_y = op(x, w, b, **kw)
        for _ in range(2):
            graph.replay()
            for d2, x2, w2, b2, kw2 in cases:  # eager calls right behind the replay
                getattr(convt, f"conv_transpose{d2}d")(x2, w2, b2, **kw2)
        torch.cuda.synchronize()
    assert rel_error(static_y, refs[1]) <= _BUDGET[dtype]
