"""The glob syntax of `glob` and of `grep`'s filter (`acp_server.agent.tools.globs`, pure)."""

from __future__ import annotations

import pytest

from acp_server.agent.tools.globs import compile_glob

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
