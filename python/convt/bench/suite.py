"""Benchmark cases: suite files, the inline shape grammar and the CPU scale-down rule.

A *case* is one transposed-convolution problem: batch, channels, input size, kernel,
stride, padding, output padding, dilation, groups and whether a bias is added. Cases come
from a suite file (JSON, see ``docs/bench.md``), from the suites shipped with convt
(``kernelbench``), or from a one-line shape string such as::

    2d N=8 C=64->64 in=512x512 k=3 s=2 p=1 op=1

This module is pure Python: it needs neither torch nor the compiled extension.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

__all__ = [
    "BUILTIN_SUITES",
    "Case",
    "ShapeError",
    "Suite",
    "SuiteError",
    "builtin_suite_path",
    "case_from_dict",
    "load_suite",
    "parse_shape",
    "scale_down",
    "select_cases",
    "SHAPE_GRAMMAR",
]

_DATA_DIR = Path(__file__).resolve().parent.parent / "data"

#: Suites shipped inside the package: name -> file in ``convt/data``.
BUILTIN_SUITES: dict[str, str] = {
    "kernelbench": "kernelbench_level1.json",
    "models": "model_layers.json",
}


class SuiteError(ValueError):
    """A suite file, or a case selection, that cannot be used."""


class ShapeError(ValueError):
    """A ``--shape`` string that does not follow the grammar."""


# ---------------------------------------------------------------------------------------
# The case
# ---------------------------------------------------------------------------------------

_PER_DIM = ("kernel_size", "stride", "padding", "output_padding", "dilation")


@dataclasses.dataclass(frozen=True)
class Case:
    """One transposed-convolution problem, with PyTorch's parameter names."""

    id: str
    dims: int
    batch: int
    in_channels: int
    out_channels: int
    input_size: tuple[int, ...]
    kernel_size: tuple[int, ...]
    stride: tuple[int, ...]
    padding: tuple[int, ...]
    output_padding: tuple[int, ...]
    dilation: tuple[int, ...]
    groups: int = 1
    bias: bool = False
    #: The case this one was scaled down from (CPU runs), or None.
    scaled_from: "Case | None" = dataclasses.field(default=None, compare=False, repr=False)

    # -- shapes ------------------------------------------------------------------------
    @property
    def output_size(self) -> tuple[int, ...]:
        """Spatial output size: (L_in-1)*s - 2p + d*(k-1) + op + 1 per dimension."""
        return tuple(
            (i - 1) * s - 2 * p + d * (k - 1) + op + 1
            for i, k, s, p, op, d in zip(
                self.input_size, self.kernel_size, self.stride, self.padding,
                self.output_padding, self.dilation,
            )
        )

    @property
    def input_shape(self) -> tuple[int, ...]:
        return (self.batch, self.in_channels, *self.input_size)

    @property
    def weight_shape(self) -> tuple[int, ...]:
        return (self.in_channels, self.out_channels // self.groups, *self.kernel_size)

    @property
    def bias_shape(self) -> tuple[int, ...] | None:
        return (self.out_channels,) if self.bias else None

    @property
    def output_shape(self) -> tuple[int, ...]:
        return (self.batch, self.out_channels, *self.output_size)

    def numels(self) -> dict[str, int]:
        """Element counts of input, weight, bias (0 when absent) and output."""
        return {
            "input": math.prod(self.input_shape),
            "weight": math.prod(self.weight_shape),
            "bias": self.out_channels if self.bias else 0,
            "output": math.prod(self.output_shape),
        }

    def flops(self) -> int:
        """Forward flops: 2 * N * C_in * (C_out/groups) * prod(kernel) * prod(input size)."""
        return (
            2 * self.batch * self.in_channels * (self.out_channels // self.groups)
            * math.prod(self.kernel_size) * math.prod(self.input_size)
        )

    # -- text forms --------------------------------------------------------------------
    def spec(self) -> str:
        """The case in the ``--shape`` grammar (defaults left out); parses back to itself."""
        parts = [
            f"{self.dims}d",
            f"N={self.batch}",
            f"C={self.in_channels}->{self.out_channels}",
            f"in={_fmt_dims(self.input_size, collapse=False)}",
            f"k={_fmt_dims(self.kernel_size)}",
        ]
        for key, value, default in (
            ("s", self.stride, 1), ("p", self.padding, 0), ("op", self.output_padding, 0),
            ("d", self.dilation, 1),
        ):
            if any(v != default for v in value):
                parts.append(f"{key}={_fmt_dims(value)}")
        if self.groups != 1:
            parts.append(f"g={self.groups}")
        if self.bias:
            parts.append("bias")
        return " ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """The case in the suite-file schema (with the derived output_size and gflop)."""
        return {
            "id": self.id,
            "dims": self.dims,
            "batch": self.batch,
            "in_channels": self.in_channels,
            "out_channels": self.out_channels,
            "input_size": list(self.input_size),
            "kernel_size": list(self.kernel_size),
            "stride": list(self.stride),
            "padding": list(self.padding),
            "output_padding": list(self.output_padding),
            "dilation": list(self.dilation),
            "groups": self.groups,
            "bias": self.bias,
            "output_size": list(self.output_size),
            "gflop": round(self.flops() / 1e9, 6),
        }

    def replace(self, **changes: Any) -> "Case":
        return dataclasses.replace(self, **changes)


def _fmt_dims(values: Sequence[int], collapse: bool = True) -> str:
    if collapse and len(set(values)) == 1:
        return str(values[0])
    return "x".join(str(v) for v in values)


def _check_case(case: Case) -> None:
    """Raise ValueError naming the offending value when PyTorch would reject the case."""
    if case.dims not in (1, 2, 3):
        raise ValueError(f"dims must be 1, 2 or 3, got {case.dims}")
    for name in ("batch", "in_channels", "out_channels", "groups"):
        if getattr(case, name) < 1:
            raise ValueError(f"{name} must be positive, got {getattr(case, name)}")
    for name in ("input_size", *_PER_DIM):
        value = getattr(case, name)
        if len(value) != case.dims:
            raise ValueError(f"{name} must have {case.dims} entries, got {list(value)}")
    for name in ("input_size", "kernel_size", "stride", "dilation"):
        if any(v < 1 for v in getattr(case, name)):
            raise ValueError(f"{name} must be positive, got {list(getattr(case, name))}")
    for name in ("padding", "output_padding"):
        if any(v < 0 for v in getattr(case, name)):
            raise ValueError(f"{name} must be non-negative, got {list(getattr(case, name))}")
    for op, s, d in zip(case.output_padding, case.stride, case.dilation):
        if op >= s and op >= d:
            raise ValueError(
                f"output_padding {list(case.output_padding)} must be smaller than either "
                f"stride {list(case.stride)} or dilation {list(case.dilation)}"
            )
    if case.in_channels % case.groups or case.out_channels % case.groups:
        raise ValueError(
            f"in_channels ({case.in_channels}) and out_channels ({case.out_channels}) must "
            f"be divisible by groups ({case.groups})"
        )
    if any(o < 1 for o in case.output_size):
        raise ValueError(f"the output size {list(case.output_size)} is too small (must be >= 1)")


# ---------------------------------------------------------------------------------------
# Suite files
# ---------------------------------------------------------------------------------------

_REQUIRED_KEYS = ("id", "dims", "batch", "in_channels", "out_channels", "input_size",
                  "kernel_size")
_OPTIONAL_KEYS = {"stride": 1, "padding": 0, "output_padding": 0, "dilation": 1,
                  "groups": 1, "bias": False}
# Informational keys a suite may carry; output_size is checked when present.
_INFO_KEYS = ("output_size", "gflop", "min_mbytes_fp32", "notes", "about", "source")
_INFO_PREFIXES = ("pytorch_ms",)


@dataclasses.dataclass(frozen=True)
class Suite:
    """A named, ordered collection of cases."""

    name: str
    cases: tuple[Case, ...]
    path: str | None = None
    about: str | None = None

    def ids(self) -> list[str]:
        return [c.id for c in self.cases]


def builtin_suite_path(name: str) -> Path:
    """Path of a suite shipped with convt (see BUILTIN_SUITES)."""
    try:
        return _DATA_DIR / BUILTIN_SUITES[name]
    except KeyError:
        raise SuiteError(
            f"unknown built-in suite {name!r} (built-in suites: {', '.join(BUILTIN_SUITES)})"
        ) from None


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _per_dim(value: Any, dims: int, key: str) -> tuple[int, ...]:
    if _is_int(value):
        return (value,) * dims
    if isinstance(value, list) and value and all(_is_int(v) for v in value):
        if len(value) != dims:
            raise ValueError(f"{key} must have {dims} entries (dims={dims}), got {value}")
        return tuple(value)
    raise ValueError(f"{key} must be an integer or a list of {dims} integers, got {value!r}")


def case_from_dict(d: Mapping[str, Any]) -> Case:
    """Build and check a case from one entry of a suite file (raises ValueError)."""
    if not isinstance(d, Mapping):
        raise ValueError(f"a case must be a JSON object, got {type(d).__name__}")
    for key in d:
        if not (key in _REQUIRED_KEYS or key in _OPTIONAL_KEYS or key in _INFO_KEYS
                or key.startswith(_INFO_PREFIXES)):
            known = ", ".join((*_REQUIRED_KEYS, *_OPTIONAL_KEYS, *_INFO_KEYS))
            raise ValueError(f"unknown key {key!r} (known keys: {known})")
    missing = [k for k in _REQUIRED_KEYS if k not in d]
    if missing:
        raise ValueError(f"missing required key(s): {', '.join(missing)}")
    if not isinstance(d["id"], str) or not d["id"].strip():
        raise ValueError(f"id must be a non-empty string, got {d['id']!r}")
    for key in ("dims", "batch", "in_channels", "out_channels", "groups"):
        if key in d and not _is_int(d[key]):
            raise ValueError(f"{key} must be an integer, got {d[key]!r}")
    dims = d["dims"]
    if dims not in (1, 2, 3):
        raise ValueError(f"dims must be 1, 2 or 3, got {dims}")
    bias = d.get("bias", False)
    if not isinstance(bias, bool):
        raise ValueError(f"bias must be true or false, got {bias!r}")
    case = Case(
        id=d["id"].strip(),
        dims=dims,
        batch=d["batch"],
        in_channels=d["in_channels"],
        out_channels=d["out_channels"],
        input_size=_per_dim(d["input_size"], dims, "input_size"),
        **{k: _per_dim(d.get(k, _OPTIONAL_KEYS.get(k, 1)), dims, k) for k in _PER_DIM},
        groups=d.get("groups", 1),
        bias=bias,
    )
    _check_case(case)
    if "output_size" in d:
        given = _per_dim(d["output_size"], dims, "output_size")
        if given != case.output_size:
            raise ValueError(
                f"output_size {list(given)} does not match the size the parameters give, "
                f"{list(case.output_size)}"
            )
    return case


def load_suite(source: str | Path) -> Suite:
    """Load a built-in suite by name (``kernelbench``) or a suite file by path.

    A suite file is JSON: ``{"about": "...", "cases": [ {case}, ... ]}`` (a bare list of
    cases is accepted too). Each case has ``id, dims, batch, in_channels, out_channels,
    input_size, kernel_size`` and optionally ``stride, padding, output_padding, dilation``
    (an integer or one per spatial dimension), ``groups`` and ``bias``. Problems raise
    SuiteError with the file and the case named.
    """
    name = str(source)
    if name in BUILTIN_SUITES:
        path = builtin_suite_path(name)
    else:
        path = Path(source)
        name = path.stem
        if not path.is_file():
            raise SuiteError(f"suite file not found: {path}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise SuiteError(
            f"{path}: not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})"
        ) from None
    except (OSError, UnicodeDecodeError) as e:
        raise SuiteError(f"{path}: cannot read: {e}") from None
    about = None
    if isinstance(data, dict):
        if "cases" not in data:
            raise SuiteError(f"{path}: the top-level object has no \"cases\" list")
        about = data.get("about")
        entries = data["cases"]
    else:
        entries = data
    if not isinstance(entries, list):
        raise SuiteError(f"{path}: \"cases\" must be a list of case objects")
    if not entries:
        raise SuiteError(f"{path}: the suite has no cases")
    cases: list[Case] = []
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        label = f"case #{i + 1}"
        if isinstance(entry, Mapping) and isinstance(entry.get("id"), str):
            label += f" ({entry['id']!r})"
        try:
            case = case_from_dict(entry)
        except ValueError as e:
            raise SuiteError(f"{path}: {label}: {e}") from None
        if case.id in seen:
            raise SuiteError(f"{path}: {label}: duplicate id {case.id!r}")
        seen.add(case.id)
        cases.append(case)
    return Suite(name=name, cases=tuple(cases), path=str(path), about=about)


def select_cases(cases: Sequence[Case], ids: Iterable[str]) -> list[Case]:
    """The cases named in ``ids`` (each entry may hold comma-separated ids), in that order."""
    wanted: list[str] = []
    for entry in ids:
        for part in str(entry).split(","):
            part = part.strip()
            if part and part not in wanted:
                wanted.append(part)
    if not wanted:
        return list(cases)
    by_id = {c.id: c for c in cases}
    unknown = [w for w in wanted if w not in by_id]
    if unknown:
        raise SuiteError(
            f"unknown case id(s): {', '.join(unknown)} (available: {', '.join(by_id)})"
        )
    return [by_id[w] for w in wanted]


# ---------------------------------------------------------------------------------------
# The shape grammar
# ---------------------------------------------------------------------------------------

SHAPE_GRAMMAR = """\
A shape is whitespace-separated tokens, in any order:
  1d | 2d | 3d        spatial dimensions (optional when in= has one entry per dimension)
  N=8                 batch size (default 1)
  C=64->128           in_channels->out_channels ("C=64" means 64->64)
  in=512x512          input spatial size, one entry per dimension (required)
  k=3  or  k=3x5      kernel size (required)
  s=2                 stride (default 1)
  p=1                 padding (default 0)
  op=1                output_padding (default 0)
  d=2                 dilation (default 1)
  g=4                 groups (default 1)
  bias                add a bias (default: no bias)
  id=name             the case's name in the results (default "shape")
A single number applies to every dimension; otherwise give one per dimension, joined
by 'x'. Example: "2d N=8 C=64->64 in=512x512 k=3 s=2 p=1 op=1"."""

_KEY_ALIASES = {
    "n": "batch", "batch": "batch",
    "c": "channels", "channels": "channels",
    "cin": "in_channels", "in_channels": "in_channels",
    "cout": "out_channels", "out_channels": "out_channels",
    "in": "input_size", "input": "input_size", "input_size": "input_size",
    "k": "kernel_size", "kernel": "kernel_size", "kernel_size": "kernel_size",
    "s": "stride", "stride": "stride",
    "p": "padding", "pad": "padding", "padding": "padding",
    "op": "output_padding", "output_padding": "output_padding",
    "d": "dilation", "dilation": "dilation",
    "g": "groups", "groups": "groups",
    "bias": "bias",
    "id": "id", "name": "id",
}
_DIMS_RE = re.compile(r"^([123])d$", re.IGNORECASE)
_INT_LIST_RE = re.compile(r"^\d+([x×]\d+)*$", re.IGNORECASE)


def _parse_ints(text: str, key: str, shape: str) -> tuple[int, ...]:
    if not _INT_LIST_RE.match(text):
        raise ShapeError(
            f"{key}={text!r} in shape {shape!r}: expected a number or numbers joined by "
            f"'x' (e.g. 3 or 3x5)"
        )
    return tuple(int(v) for v in re.split(r"[x×]", text, flags=re.IGNORECASE))


def parse_shape(text: str, default_id: str = "shape") -> Case:
    """Parse one shape string (grammar: SHAPE_GRAMMAR) into a checked Case."""
    tokens = text.split()
    if not tokens:
        raise ShapeError("empty shape string")
    dims: int | None = None
    fields: dict[str, Any] = {}

    def put(field: str, value: Any, token: str) -> None:
        if field in fields:
            raise ShapeError(f"{token!r} in shape {text!r}: {field} is given twice")
        fields[field] = value

    for tok in tokens:
        m = _DIMS_RE.match(tok)
        if m:
            if dims is not None:
                raise ShapeError(f"{tok!r} in shape {text!r}: the dimension is given twice")
            dims = int(m.group(1))
            continue
        if tok.lower() in ("bias", "+bias"):
            put("bias", True, tok)
            continue
        if "=" not in tok:
            raise ShapeError(
                f"unknown token {tok!r} in shape {text!r} (expected 1d/2d/3d, bias, or "
                f"key=value with key one of N, C, in, k, s, p, op, d, g, id)"
            )
        raw_key, value = tok.split("=", 1)
        field = _KEY_ALIASES.get(raw_key.lower())
        if field is None:
            raise ShapeError(
                f"unknown key {raw_key!r} in shape {text!r} (keys: N, C, in, k, s, p, op, "
                f"d, g, bias, id)"
            )
        if not value:
            raise ShapeError(f"{tok!r} in shape {text!r}: missing value")
        if field == "id":
            put("id", value, tok)
        elif field == "bias":
            flag = value.lower()
            if flag not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                raise ShapeError(f"{tok!r} in shape {text!r}: bias takes true or false")
            put("bias", flag in ("1", "true", "yes", "on"), tok)
        elif field == "channels":
            parts = re.split(r"->|→|:", value)
            if len(parts) > 2 or not all(p.isdigit() for p in parts):
                raise ShapeError(
                    f"{tok!r} in shape {text!r}: expected C=IN->OUT (e.g. C=64->128) or C=N"
                )
            put("in_channels", int(parts[0]), tok)
            put("out_channels", int(parts[-1]), tok)
        elif field in ("batch", "groups", "in_channels", "out_channels"):
            if not value.isdigit():
                raise ShapeError(f"{tok!r} in shape {text!r}: expected a whole number")
            put(field, int(value), tok)
        else:
            put(field, _parse_ints(value, raw_key, text), tok)

    for field, what in (("input_size", "in= (input size)"), ("kernel_size", "k= (kernel size)"),
                        ("in_channels", "C= (channels)")):
        if field not in fields:
            raise ShapeError(f"shape {text!r} has no {what}")
    if "out_channels" not in fields:
        raise ShapeError(f"shape {text!r} gives in_channels but no out_channels")
    if dims is None:
        dims = len(fields["input_size"])
        if dims not in (1, 2, 3):
            raise ShapeError(f"shape {text!r}: in= must have 1, 2 or 3 entries")

    def per_dim(field: str, default: int) -> tuple[int, ...]:
        value = fields.get(field, (default,))
        if len(value) == 1:
            return value * dims
        if len(value) != dims:
            raise ShapeError(
                f"shape {text!r}: {field} {'x'.join(map(str, value))} has {len(value)} "
                f"entries but the case is {dims}d"
            )
        return value

    try:
        case = Case(
            id=fields.get("id", default_id),
            dims=dims,
            batch=fields.get("batch", 1),
            in_channels=fields["in_channels"],
            out_channels=fields["out_channels"],
            input_size=per_dim("input_size", 1),
            kernel_size=per_dim("kernel_size", 1),
            stride=per_dim("stride", 1),
            padding=per_dim("padding", 0),
            output_padding=per_dim("output_padding", 0),
            dilation=per_dim("dilation", 1),
            groups=fields.get("groups", 1),
            bias=fields.get("bias", False),
        )
        _check_case(case)
    except ValueError as e:
        if isinstance(e, ShapeError):
            raise
        raise ShapeError(f"shape {text!r}: {e}") from None
    return case


# ---------------------------------------------------------------------------------------
# CPU scale-down
# ---------------------------------------------------------------------------------------

#: Default flop budget per case for runs on the CPU.
CPU_MAX_FLOPS = 50_000_000


def scale_down(case: Case, max_flops: int = CPU_MAX_FLOPS) -> Case:
    """A smaller version of ``case`` for CPU runs; the case itself when already small.

    Rule: a case of at most ``max_flops`` forward flops is kept as it is. Otherwise the
    batch becomes 1, then the largest input spatial extent (the first among equals) is
    halved, rounding up, until the case is within ``max_flops`` or no extent can shrink
    (an extent of 1, or one whose halving would leave an empty output). Channels, kernel,
    stride, padding, output padding, dilation, groups and bias are kept.
    """
    if max_flops <= 0 or case.flops() <= max_flops:
        return case
    scaled = case.replace(batch=1, scaled_from=case)
    while scaled.flops() > max_flops:
        order = sorted(range(case.dims), key=lambda i: (-scaled.input_size[i], i))
        for i in order:
            size = list(scaled.input_size)
            if size[i] == 1:
                continue
            size[i] = (size[i] + 1) // 2
            candidate = scaled.replace(input_size=tuple(size))
            if all(o >= 1 for o in candidate.output_size):
                scaled = candidate
                break
        else:
            break
    return scaled
