"""Shared helpers for convt's Python tests: the seeded case generator, tensor builders
and the error metric.

The oracle everywhere is PyTorch itself: ``torch.nn.functional.conv_transpose{1,2,3}d``
and its autograd, in the same dtype on the CPU (tight tolerances), or in float64 for the
CUDA precision budgets (SPEC §3).
"""

from __future__ import annotations

import dataclasses
import random
from typing import List, Optional, Tuple

import pytest
import torch
import torch.nn.functional as F

import convt

# Small tensors, few threads: the whole suite runs in minutes on two cores.
torch.set_num_threads(min(2, torch.get_num_threads()))

TORCH_FUNCTIONAL = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}
CONVT_FUNCTIONAL = {1: convt.conv_transpose1d, 2: convt.conv_transpose2d, 3: convt.conv_transpose3d}

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def requires_convt_cuda(fn):
    """Skip (with the reason shown) unless a GPU and convt's CUDA backend are both there."""
    fn = pytest.mark.cuda(fn)
    fn = requires_cuda(fn)
    return pytest.mark.skipif(
        torch.cuda.is_available() and not convt.built_with_cuda(),
        reason="convt was built without its CUDA backend",
    )(fn)


# ---------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------

LAYOUTS = ("contiguous", "channels_last", "weight_channels_last", "strided", "permuted")


@dataclasses.dataclass(frozen=True)
class Case:
    """One transposed convolution: shapes, arguments and the memory layout of its inputs."""

    dims: int
    batch: Optional[int]  # None: unbatched input
    in_channels: int
    out_channels: int
    groups: int
    input_size: Tuple[int, ...]
    kernel_size: Tuple[int, ...]
    stride: Tuple[int, ...]
    padding: Tuple[int, ...]
    output_padding: Tuple[int, ...]
    dilation: Tuple[int, ...]
    bias: bool
    layout: str = "contiguous"

    def output_size(self) -> Tuple[int, ...]:
        return tuple(
            (i - 1) * s - 2 * p + d * (k - 1) + op + 1
            for i, k, s, p, op, d in zip(
                self.input_size, self.kernel_size, self.stride, self.padding, self.output_padding, self.dilation
            )
        )

    def args(self) -> dict:
        """Keyword arguments of F.conv_transpose*d. Scalars where all dimensions agree (both
        spellings get exercised)."""

        def arg(v):
            return v[0] if len(set(v)) == 1 and sum(v) % 2 == 0 else v

        return dict(
            stride=arg(self.stride),
            padding=arg(self.padding),
            output_padding=arg(self.output_padding),
            groups=self.groups,
            dilation=arg(self.dilation),
        )

    def __str__(self) -> str:
        n = "unbatched" if self.batch is None else f"N{self.batch}"
        return (
            f"{self.dims}d-{n}-C{self.in_channels}to{self.out_channels}-g{self.groups}-in{list(self.input_size)}"
            f"-k{list(self.kernel_size)}-s{list(self.stride)}-p{list(self.padding)}-op{list(self.output_padding)}"
            f"-d{list(self.dilation)}-{'bias' if self.bias else 'nobias'}-{self.layout}"
        )


def _random_case(rng: random.Random, dims: int) -> Case:
    max_in = {1: 7, 2: 5, 3: 3}[dims]
    groups = rng.choice([1, 1, 1, 2, 3])
    cig = rng.choice([1, 2])
    cog = rng.choice([1, 2])
    depthwise = rng.random() < 0.15
    if depthwise:
        groups = rng.choice([2, 3, 4])
        cig, cog = 1, rng.choice([1, 2])
    stride, padding, output_padding, dilation, kernel, size = [], [], [], [], [], []
    for _ in range(dims):
        s = rng.choice([1, 1, 2, 2, 3])
        d = rng.choice([1, 1, 1, 2, 3])
        k = rng.choice([1, 2, 3, 3])
        p = rng.choice([0, 0, 1, 2])
        # output_padding < stride or < dilation; sometimes >= stride (but < dilation).
        op = rng.randrange(max(s, d))
        i = rng.randint(1, max_in)
        # Keep the output non-empty: lower the padding until it is.
        while p > 0 and (i - 1) * s - 2 * p + d * (k - 1) + op + 1 < 1:
            p -= 1
        stride.append(s), dilation.append(d), kernel.append(k), padding.append(p)
        output_padding.append(op), size.append(i)
    r = rng.random()
    batch = None if r < 0.1 else (0 if r < 0.16 else rng.choice([1, 2]))
    layout = rng.choice(LAYOUTS) if dims >= 2 else rng.choice(("contiguous", "strided", "permuted"))
    return Case(
        dims=dims,
        batch=batch,
        in_channels=groups * cig,
        out_channels=groups * cog,
        groups=groups,
        input_size=tuple(size),
        kernel_size=tuple(kernel),
        stride=tuple(stride),
        padding=tuple(padding),
        output_padding=tuple(output_padding),
        dilation=tuple(dilation),
        bias=rng.random() < 0.6,
        layout=layout,
    )


def _special_cases() -> List[Case]:
    """Cases the random draw could miss, each named by what it covers."""
    c = Case
    return [
        # output_padding >= stride but < dilation
        c(1, 2, 2, 2, 1, (4,), (3,), (1,), (0,), (1,), (2,), True),
        c(2, 1, 2, 3, 1, (3, 4), (2, 3), (1, 2), (0, 1), (2, 2), (3, 3), False, "channels_last"),
        c(3, 1, 2, 2, 1, (2, 3, 2), (2, 2, 1), (1, 1, 2), (0, 0, 0), (1, 0, 1), (2, 1, 2), True),
        # depthwise
        c(2, 2, 4, 4, 4, (4, 4), (3, 3), (2, 2), (1, 1), (1, 1), (1, 1), True),
        c(1, 2, 3, 6, 3, (6,), (5,), (4,), (2,), (3,), (1,), True),
        c(3, 1, 3, 3, 3, (2, 3, 3), (3, 3, 3), (2, 2, 2), (1, 1, 1), (1, 1, 1), (1, 1, 1), False, "channels_last"),
        # asymmetric kernels and arguments
        c(2, 1, 3, 2, 1, (3, 5), (1, 4), (3, 1), (0, 2), (2, 0), (1, 2), True, "permuted"),
        c(3, 1, 2, 4, 2, (2, 1, 3), (3, 1, 2), (1, 3, 2), (1, 0, 0), (0, 2, 1), (1, 1, 2), True, "strided"),
        # batch 0, unbatched
        c(2, 0, 2, 3, 1, (3, 3), (2, 2), (2, 2), (0, 0), (1, 1), (1, 1), True),
        c(1, None, 2, 4, 2, (5,), (3,), (2,), (1,), (1,), (1,), True),
        c(3, None, 2, 2, 1, (2, 2, 2), (2, 2, 2), (2, 2, 2), (0, 0, 0), (0, 0, 0), (1, 1, 1), False),
        # 1x1 kernels, stride > kernel (outputs no tap reaches), large padding
        c(2, 2, 3, 2, 1, (3, 3), (1, 1), (3, 3), (0, 0), (2, 2), (1, 1), True),
        c(1, 1, 2, 2, 1, (6,), (3,), (1,), (2,), (0,), (1,), False),
        # degenerate layouts: size-1 dimensions with channels_last strides
        c(2, 2, 4, 2, 1, (1, 1), (2, 2), (1, 1), (0, 0), (0, 0), (1, 1), True, "channels_last"),
        c(2, 1, 1, 3, 1, (3, 3), (2, 2), (2, 2), (0, 0), (0, 0), (1, 1), True, "channels_last"),
    ]


def make_cases(count: int, seed: int = 1234, dims=(1, 2, 3)) -> List[Case]:
    """``count`` cases, deterministically: the special cases, then seeded random draws
    spread evenly over the spatial dimensionalities in ``dims``."""
    rng = random.Random(seed)
    cases = [c for c in _special_cases() if c.dims in dims]
    i = 0
    while len(cases) < count:
        cases.append(_random_case(rng, dims[i % len(dims)]))
        i += 1
    return cases[:count]


# ---------------------------------------------------------------------------------------
# Tensors
# ---------------------------------------------------------------------------------------


def _layout(t: torch.Tensor, layout: str) -> torch.Tensor:
    """``t`` (same values) in the requested memory layout."""
    nd = t.dim()
    if layout == "channels_last" and nd in (4, 5):
        return t.contiguous(memory_format=torch.channels_last if nd == 4 else torch.channels_last_3d)
    if layout == "strided":
        # A view with gaps: every other element of a larger buffer along the last dimension.
        big = torch.zeros(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype, device=t.device)
        big[..., ::2] = t
        return big[..., ::2]
    if layout == "permuted":
        # A transposed buffer: the last two dimensions swapped in memory.
        return t.transpose(-1, -2).contiguous().transpose(-1, -2)
    return t


def make_tensors(case: Case, dtype=torch.float32, device="cpu", seed: int = 0, requires_grad: bool = False):
    """(input, weight, bias) of a case, values uniform in [-1, 1], in the case's layout."""
    g = torch.Generator().manual_seed(seed)
    x_shape = ((case.batch,) if case.batch is not None else ()) + (case.in_channels,) + case.input_size
    w_shape = (case.in_channels, case.out_channels // case.groups) + case.kernel_size

    def rand(shape):
        return (torch.rand(shape, generator=g, dtype=torch.float64) * 2 - 1).to(dtype).to(device)

    x, w = rand(x_shape), rand(w_shape)
    b = rand((case.out_channels,)) if case.bias else None
    if case.layout == "weight_channels_last":
        w = _layout(w, "channels_last")
    else:
        x = _layout(x, case.layout)
    if requires_grad:
        x.requires_grad_()
        w.requires_grad_()
        if b is not None:
            b.requires_grad_()
    return x, w, b


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """max |out - ref| / max |ref| (SPEC §3), computed in float64; 0 for empty tensors."""
    if ref.numel() == 0:
        return 0.0
    out, ref = out.detach().double().cpu(), ref.detach().double().cpu()
    scale = ref.abs().max().item()
    err = (out - ref).abs().max().item()
    return err / scale if scale > 0 else err


def case_id(case: Case) -> str:
    return str(case)


# ---------------------------------------------------------------------------------------
# Worst errors seen by the sweeps, per mode (precision and reference) and direction,
# printed at the end of the run (test_functional.py and test_cuda.py record them).
# ---------------------------------------------------------------------------------------
WORST_ERRORS: dict = {}


def record_error(mode: str, what: str, error: float, budget: float) -> None:
    """Remember the largest error of (mode, what) and its budget."""
    key = (mode, what)
    if key not in WORST_ERRORS or error > WORST_ERRORS[key][0]:
        WORST_ERRORS[key] = (error, budget)


def pytest_terminal_summary(terminalreporter):
    if not WORST_ERRORS:
        return
    terminalreporter.section("worst errors of the sweeps: max|out - ref| / max|ref|")
    for (mode, what), (error, budget) in sorted(WORST_ERRORS.items()):
        terminalreporter.write_line(f"{mode:16s} {what:14s} {error:9.2e}  bound {budget:.1e}")


def layer_tensors(layer, bias, seed):
    """The input, weight and bias (CPU, float32) of a layer given as (dims, batch, in, out,
    groups, size, kernel, stride, padding, output padding, dilation), the weight scaled by
    its fan-in, and the functional API's keyword arguments: (dims, x, w, b, kwargs)."""
    dims, n, cin, cout, g, size, k, s, p, op, d = layer
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, cin, *size, generator=gen)
    w = torch.randn(cin, cout // g, *k, generator=gen) / (cin // g * len(k)) ** 0.5
    b = torch.randn(cout, generator=gen) if bias else None
    kw = dict(stride=s, padding=p, output_padding=op, groups=g, dilation=d)
    return dims, x, w, b, kw
