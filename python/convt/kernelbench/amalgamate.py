"""convt's C++/CUDA sources as a few self-contained text blocks (an amalgamation).

A KernelBench solution is a single Python file that compiles its kernels with
``torch.utils.cpp_extension.load_inline``, which takes one C++ and one CUDA source
string. This module turns convt's source tree into such strings:

* :func:`find_source_root` finds the tree: ``convt/_sources`` inside an installed
  package (``include/`` and ``src/`` copied there by the build), or the repository that
  holds an in-tree or editable package;
* :func:`amalgamate` inlines a set of files the way a single-header amalgamation does:
  every ``#include "..."`` of a project file is replaced by that file's text the first
  time it is met and dropped afterwards (``#pragma once`` semantics); system includes
  (``#include <...>``) are kept;
* :func:`convt_sources` gives the three blocks the exported file carries: the public API
  headers, the C++ translation units (problem model, API, CPU backend) and the CUDA
  translation units (CUDA backend and its header-only kernels).

Project includes are resolved the way convt's build resolves them: relative to the
including file first, then against ``include/`` and ``src/``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from pathlib import Path
from typing import Iterable, Sequence

__all__ = [
    "AmalgamationError",
    "ConvtSources",
    "SourceTree",
    "amalgamate",
    "convt_sources",
    "find_source_root",
]

_INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
_SYSTEM_INCLUDE_RE = re.compile(r"^\s*#\s*include\s*<([^>]+)>")
_PRAGMA_ONCE_RE = re.compile(r"^\s*#\s*pragma\s+once\b")

# Translation units compiled first, in this order (the rest follow sorted by path).
_CORE_ORDER = ("src/problem.cpp", "src/tensor.cpp", "src/api.cpp")


class AmalgamationError(RuntimeError):
    """convt's sources cannot be found or inlined."""


@dataclasses.dataclass(frozen=True)
class SourceTree:
    """A directory holding convt's ``include/`` and ``src/`` trees."""

    root: Path
    origin: str  # "package" (convt/_sources) or "repository"

    @property
    def include_dir(self) -> Path:
        return self.root / "include"

    @property
    def src_dir(self) -> Path:
        return self.root / "src"

    def rel(self, path: Path) -> str:
        return path.resolve().relative_to(self.root.resolve()).as_posix()

    def core_units(self) -> list[Path]:
        """The C++ translation units (``src/**/*.cpp``), core files first."""
        units = sorted(self.src_dir.rglob("*.cpp"))
        first = [self.root / p for p in _CORE_ORDER if (self.root / p).is_file()]
        return first + [u for u in units if u not in first]

    def cuda_units(self) -> list[Path]:
        """The CUDA translation units (``src/**/*.cu``)."""
        return sorted(self.src_dir.rglob("*.cu"))

    def api_headers(self) -> list[Path]:
        """The umbrella header of the public API (``include/convt/convt.hpp``)."""
        return [self.include_dir / "convt" / "convt.hpp"]


def _is_tree(root: Path) -> bool:
    return (root / "include" / "convt" / "convt.hpp").is_file() and (root / "src" / "api.cpp").is_file()


def find_source_root(package_dir: Path | None = None) -> SourceTree:
    """Where convt's C++/CUDA sources are.

    Looks in ``<package>/_sources`` (an installed package), then in the repository that
    contains the package (``<package>/../../`` for the in-tree layout ``python/convt``).
    Raises AmalgamationError, naming both places, when neither holds the sources.
    """
    if package_dir is None:
        package_dir = Path(__file__).resolve().parent.parent
    package_dir = Path(package_dir)
    installed = package_dir / "_sources"
    repository = package_dir.parent.parent
    if _is_tree(installed):
        return SourceTree(installed, "package")
    if _is_tree(repository):
        return SourceTree(repository, "repository")
    raise AmalgamationError(
        "convt's C++/CUDA sources were not found: looked for include/convt/convt.hpp and "
        f"src/api.cpp in {installed} (an installed package) and in {repository} (a source "
        "checkout). Reinstall convt from a build that ships its sources, or run from the "
        "repository."
    )


def _resolve(name: str, including: Path, tree: SourceTree) -> Path | None:
    for base in (including.parent, tree.include_dir, tree.src_dir):
        candidate = base / name
        if candidate.is_file():
            return candidate.resolve()
    return None


def amalgamate(
    files: Sequence[Path],
    tree: SourceTree,
    seen: set[Path] | None = None,
    *,
    markers: bool = True,
) -> str:
    """One text holding ``files`` with their project includes inlined.

    ``seen`` holds the files already inlined into an earlier block of the same
    translation unit (they are dropped here); it is updated in place. A project include
    that resolves to no file raises AmalgamationError. System includes are kept as
    written, so the result compiles wherever the original tree compiled.
    """
    if seen is None:
        seen = set()
    out: list[str] = []
    stack: list[Path] = []

    def emit(path: Path) -> None:
        path = path.resolve()
        if path in seen:
            return
        if path in stack:  # an include cycle: #pragma once would stop it here too
            return
        seen.add(path)
        stack.append(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise AmalgamationError(f"cannot read {path}: {e}") from None
        if markers:
            out.append(f"// ---- begin {tree.rel(path)} ----\n")
        for lineno, line in enumerate(text.splitlines(keepends=True), 1):
            if _PRAGMA_ONCE_RE.match(line):
                continue
            m = _INCLUDE_RE.match(line)
            if m:
                target = _resolve(m.group(1), path, tree)
                if target is None:
                    raise AmalgamationError(
                        f"{tree.rel(path)}:{lineno}: #include \"{m.group(1)}\" names no file "
                        f"of convt's source tree (searched next to the file, "
                        f"{tree.include_dir} and {tree.src_dir})"
                    )
                emit(target)
                continue
            out.append(line if line.endswith("\n") else line + "\n")
        if markers:
            out.append(f"// ---- end {tree.rel(path)} ----\n")
        stack.pop()

    for f in files:
        emit(Path(f))
    return "".join(out)


def system_includes(text: str) -> list[str]:
    """The system headers (``<...>``) a block includes, in order of first use."""
    names: list[str] = []
    for line in text.splitlines():
        m = _SYSTEM_INCLUDE_RE.match(line)
        if m and m.group(1) not in names:
            names.append(m.group(1))
    return names


@dataclasses.dataclass(frozen=True)
class ConvtSources:
    """The blocks of convt's C++/CUDA code an exported file carries.

    ``api``: the public headers (``convt/convt.hpp`` and what it includes).
    ``core``: the C++ translation units (``src/**/*.cpp``) minus what ``api`` holds.
    ``cuda``: the CUDA translation units (``src/**/*.cu``) minus what ``api`` holds.

    A C++ translation unit of ``api + core`` is convt's CPU build; adding a CUDA
    translation unit ``api + cuda`` (both compiled with ``-DCONVT_WITH_CUDA``) gives the
    CUDA build, exactly as convt's CMake build splits them.
    """

    api: str
    core: str
    cuda: str
    version: str
    files: tuple[str, ...]  # every file inlined, relative to the tree
    origin: str

    def digest(self) -> str:
        h = hashlib.sha256()
        for block in (self.api, self.core, self.cuda):
            h.update(block.encode("utf-8"))
            h.update(b"\0")
        return h.hexdigest()


def _version(tree: SourceTree) -> str:
    path = tree.include_dir / "convt" / "version.hpp"
    try:
        m = re.search(r'#define\s+CONVT_VERSION_STRING\s+"([^"]*)"', path.read_text(encoding="utf-8"))
    except OSError:
        m = None
    return m.group(1) if m else "unknown"


def convt_sources(tree: SourceTree | None = None) -> ConvtSources:
    """Amalgamate convt's sources into the blocks of :class:`ConvtSources`."""
    tree = tree or find_source_root()
    api_seen: set[Path] = set()
    api = amalgamate(tree.api_headers(), tree, api_seen)
    core_seen = set(api_seen)
    core = amalgamate(tree.core_units(), tree, core_seen)
    cuda_seen = set(api_seen)
    cuda = amalgamate(tree.cuda_units(), tree, cuda_seen)
    if not tree.cuda_units():
        raise AmalgamationError(f"no CUDA sources (src/**/*.cu) in {tree.root}")
    files = sorted({tree.rel(p) for p in core_seen | cuda_seen})
    return ConvtSources(api=api, core=core, cuda=cuda, version=_version(tree), files=tuple(files),
                        origin=f"{tree.origin} {tree.root}")


def iter_lines(blocks: Iterable[str]) -> int:
    """Total number of lines of some blocks (for reports)."""
    return sum(b.count("\n") for b in blocks)
