"""The glob syntax of `glob` and of `grep`'s filter (`acp_server.agent.tools.globs`, pure)."""

from __future__ import annotations

import os

import pytest

from acp_server.agent.tools.globs import GlobError, compile_glob
from acp_server.core.line_regex import PathRegex

CASES = [
    ("*.py", "a.py", True),
    ("*.py", "s/a.py", False),
    ("**/*.py", "a.py", True),
    ("**/*.py", "s/t/a.py", True),
    ("s/**", "s/t/a.py", True),
    ("s/**", "sx/a.py", False),
    ("**", "any/depth/at/all", True),
    ("a?c", "abc", True),
    ("a?c", "a/c", False),
    ("[ab].txt", "b.txt", True),
    ("[!ab].txt", "c.txt", True),
    ("[!ab].txt", "a.txt", False),
    ("*.{ts,tsx}", "x.tsx", True),
    ("*.{ts,tsx}", "x.js", False),
    ("{src,lib/{a,b}}/*.c", "lib/b/x.c", True),
    ("{src,lib/{a,b}}/*.c", "lib/c/x.c", False),
    ("a+b(1).txt", "a+b(1).txt", True),
    ("[unclosed", "[unclosed", True),
    ("{unclosed", "{unclosed", True),
    ("./a.py", "a.py", True),
    (".*", ".env", True),
    ("x**y", "x/y", False),
]


@pytest.mark.parametrize(("pattern", "path", "matches"), CASES)
def test_glob_syntax(pattern: str, path: str, matches: bool) -> None:
    assert (compile_glob(pattern).fullmatch(path) is not None) is matches


CATASTROPHIC = "*a" * 6 + "*b"
"""Made a Python expression, `[^/]*a` six times then `[^/]*b`: against a name of 80 `a`s it
backtracks for about ten seconds holding the GIL (each star more multiplies that by the length)."""


def test_a_catastrophic_glob_is_matched_in_linear_time() -> None:
    # RE2's matcher, not Python's backtracking one (whose cost is for benchmarks/, not a test).
    compiled = compile_glob(CATASTROPHIC)
    assert type(compiled) is PathRegex
    assert compiled.fullmatch("a" * 80) is None
    assert compiled.fullmatch("a" * 80 + "b") is not None


def test_a_glob_that_makes_no_valid_expression_is_a_glob_error() -> None:
    with pytest.raises(GlobError) as caught:
        compile_glob("[z-a].txt")
    assert str(caught.value) == (
        "invalid glob pattern '[z-a].txt': invalid character class range: z-a"
    )


def test_a_name_that_is_not_utf8_is_matched_character_by_character() -> None:
    name = os.fsdecode(b"x\xffy.txt")  # as a directory listing gives it
    assert compile_glob("x?y.*").fullmatch(name) is not None
    assert compile_glob("*.txt").fullmatch(name) is not None
    assert compile_glob("x??y.txt").fullmatch(name) is None
