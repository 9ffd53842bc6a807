"""Glob patterns as regular expressions (pure): the syntax `glob` and `grep`'s filter accept.

The usual shell syntax over "/"-separated relative paths: `*` and `?` stay within one path
segment, `**` as a whole segment spans any number of them (`**/` may be none), `[abc]`,
`[!abc]` and `{a,b}` (nestable) as in bash and ripgrep. Dot files are not special. Python's
`fnmatch` lets `*` cross "/", and `glob.translate` needs Python 3.13, hence this module.

A pattern is matched with RE2 (`PathRegex`), in time linear in the path: the model writes it,
and `*a*a*a*a*a*a*a*a*b` as a Python expression backtracks for hours against a long name of
`a`s, holding the GIL. A pattern that makes no valid expression (`[z-a]`) is a `GlobError`.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ...core.line_regex import PathRegex, PatternError


class GlobError(ValueError):
    """A glob pattern that makes no valid expression; the message names it and says why."""


def _class_end(pattern: str, start: int) -> int:
    """The index just past the `]` closing the class opened at `start`, or -1 if unclosed."""
    index = start + 1
    if index < len(pattern) and pattern[index] in "!^":
        index += 1
    if index < len(pattern) and pattern[index] == "]":
        index += 1  # a leading "]" is a member
    close = pattern.find("]", index)
    return -1 if close < 0 else close + 1


def _brace_end(pattern: str, start: int) -> int:
    """The index of the `}` closing the brace opened at `start`, or -1 if unclosed."""
    depth = 0
    for index in range(start, len(pattern)):
        char = pattern[index]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index
    return -1


def _split_alternatives(body: str) -> list[str]:
    """`a,{b,c},d` split at its top-level commas."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in body:
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        depth += {"{": 1, "}": -1}.get(char, 0)
        current.append(char)
    parts.append("".join(current))
    return parts


def _translate(pattern: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        at_segment_start = index == 0 or pattern[index - 1] == "/"
        if pattern.startswith("**", index) and at_segment_start:
            after = index + 2
            if after == len(pattern):
                out.append(".*")
                index = after
                continue
            if pattern[after] == "/":
                out.append("(?:[^/]*/)*")
                index = after + 1
                continue
        if char == "*":
            while index < len(pattern) and pattern[index] == "*":
                index += 1
            out.append("[^/]*")
            continue
        if char == "?":
            out.append("[^/]")
        elif char == "[" and (end := _class_end(pattern, index)) > 0:
            body = pattern[index + 1 : end - 1]
            negated = body[:1] in ("!", "^")
            if negated:
                body = body[1:]
            members = body.replace("\\", "\\\\")
            out.append(f"[^/{members}]" if negated else f"[{members}]")
            index = end
            continue
        elif char == "{" and (end := _brace_end(pattern, index)) > 0:
            alternatives = _split_alternatives(pattern[index + 1 : end])
            out.append("(?:" + "|".join(_translate(part) for part in alternatives) + ")")
            index = end + 1
            continue
        else:
            out.append(re.escape(char))
        index += 1
    return "".join(out)


@lru_cache(maxsize=64)
def compile_glob(pattern: str) -> PathRegex:
    """The regular expression whose `fullmatch` tells whether a relative path matches
    (`GlobError` when the pattern makes none)."""
    try:
        return PathRegex("(?s)" + _translate(pattern.removeprefix("./")))
    except PatternError as exc:
        raise GlobError(f"invalid glob pattern {pattern!r}: {exc}") from None
