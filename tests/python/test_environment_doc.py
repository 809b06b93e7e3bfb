"""docs/environment.md names every CONVT_* environment variable that convt's sources read
(C++, CUDA and Python), and the variables it documents are ones something reads (the
sources, the build files or the scripts). Needs only the repository's files."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "environment.md"
NAME = re.compile(r"\bCONVT_[A-Z0-9_]*[A-Z0-9]\b")


def names_in(paths):
    found = {}
    for path in paths:
        for name in NAME.findall(path.read_text(encoding="utf-8", errors="replace")):
            found.setdefault(name, path.relative_to(ROOT))
    return found


def source_files():
    exts = {".cpp", ".cu", ".cuh", ".hpp", ".h", ".py"}
    return [p for d in ("src", "include", "python/convt") for p in (ROOT / d).rglob("*")
            if p.suffix in exts and p.is_file()]


def read_variables():
    """The CONVT_* names the sources pass to getenv (C++) or os.environ (Python), and the
    planner's helpers that read one (wg_env_int and the like)."""
    read = {}
    call = re.compile(r"(?:getenv|env_int|env_int_or|environ\.get|environ\[|os\.getenv)\s*"
                      r"\(?\s*\"(CONVT_[A-Z0-9_]+)\"")
    for path in source_files():
        for name in call.findall(path.read_text(encoding="utf-8", errors="replace")):
            read.setdefault(name, path.relative_to(ROOT))
    return read


def documented():
    return set(re.findall(r"`(CONVT_[A-Z0-9_]+)`", DOC.read_text(encoding="utf-8")))


def test_every_variable_the_sources_read_is_documented():
    read = read_variables()
    # (The planner reads a few dozen; a pattern that found none would make this test empty.)
    assert len(read) > 30, sorted(read)
    missing = {name: str(path) for name, path in read.items() if name not in documented()}
    assert not missing, f"read but not in docs/environment.md: {missing}"


def test_every_documented_variable_is_read_somewhere():
    others = [p for d in ("scripts", ".ci") for p in (ROOT / d).rglob("*")
              if p.is_file() and p.suffix in {".sh", ".py", ""}]
    others += [ROOT / "CMakeLists.txt", ROOT / "pyproject.toml"]
    others += list((ROOT / "tests").rglob("*.cpp")) + list((ROOT / "tests").rglob("*.hpp"))
    others += list((ROOT / "tests").rglob("CMakeLists.txt"))
    mentioned = names_in(source_files() + [p for p in others if p.exists()])
    stale = sorted(documented() - set(mentioned))
    assert not stale, f"in docs/environment.md but read nowhere: {stale}"


@pytest.mark.parametrize("name", ["CONVT_WG_EVEN", "CONVT_WG_XP_RING", "CONVT_WG_XP_EARLY",
                                  "CONVT_FORWARD_KERNEL", "CONVT_LOG"])
def test_known_variables(name):
    assert name in read_variables()
    assert name in documented()
