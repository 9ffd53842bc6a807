""".gitignore rules for the tree-walking tools (`list_directory`, `glob`, `grep`), via `pathspec`.

Git reads a `.gitignore` in every directory; its patterns are relative to that directory, and a
deeper file overrides a shallower one (the last matching pattern of the deepest file that has
one decides, so `!keep.log` below re-includes what `*.log` above excluded). An ignored directory
is not entered at all, so nothing beneath it can be re-included, as in git.

`pathspec.GitIgnoreSpec.check_file` costs tens of microseconds a path, far too much for a tree of
50,000 files. Each layer therefore also keeps one regular expression that is the union of its
patterns' own regular expressions (those pathspec compiled): most paths match no pattern, and
for them that one C-level match settles it; a path it does match goes to `check_file`, so the
answer is always pathspec's. That union is matched with RE2 (`PathRegex`), as pathspec's own
backend matches the patterns: a repository's `*a*a*a*a*a*a*a*a*b` as a Python expression would
backtrack for hours against a long file name, holding the GIL.

A `.gitignore` is part of the repository, so it is read as `regular.read_regular` reads: a
regular file only (a symlink is not followed, as git no longer follows one either; a FIFO or a
device is skipped without waiting on it), and at most `GITIGNORE_MAX_BYTES`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from .regular import read_regular

if TYPE_CHECKING:  # pathspec and RE2 are imported by the first walk, not by loading the tools
    from pathspec import GitIgnoreSpec

    from ...core.line_regex import PathRegex

GITIGNORE: Final = ".gitignore"
GITIGNORE_MAX_BYTES: Final = 1 << 20
"""The largest `.gitignore` read: 1 MiB. Real ones are a few kilobytes (GitHub's templates are
all under 10 KiB); a larger one is skipped whole, as git skips one over its own limit, rather
than cut, since a pattern cut in two could ignore what it never meant to."""

# pathspec names a group in some patterns; a union of several would define the name twice.
_NAMED_GROUP: Final = re.compile(r"\(\?P<\w+>")


@dataclass(frozen=True)
class _Layer:
    """The patterns of one `.gitignore` (or of the caller's own list), and where they apply."""

    base: str
    """The directory the patterns are relative to, relative to the walk's root ("" for the
    root itself), with a trailing "/" unless empty."""
    spec: GitIgnoreSpec
    prefilter: PathRegex
    """Matches every path some pattern matches (and maybe more)."""


def _parses(line: str) -> bool:
    from pathspec import GitIgnoreSpec

    try:
        GitIgnoreSpec.from_lines([line])
    except (ValueError, re.error):
        return False
    return True


def _spec(lines: list[str]) -> GitIgnoreSpec:
    """The spec of `lines`; like git, a line that is not a valid pattern is skipped, not fatal."""
    from pathspec import GitIgnoreSpec

    try:
        return GitIgnoreSpec.from_lines(lines)
    except (ValueError, re.error):
        return GitIgnoreSpec.from_lines([line for line in lines if _parses(line)])


def _union(regexes: list[str]) -> PathRegex:
    from ...core.line_regex import PathRegex, PatternError

    try:
        return PathRegex("|".join(f"(?:{regex})" for regex in regexes))
    except PatternError:
        # Some pattern's expression does not survive being joined (or RE2 takes it otherwise):
        # every path then goes to `check_file`, slower but still pathspec's answer.
        return PathRegex("")


def _layer(base: str, lines: Iterable[str]) -> _Layer | None:
    from pathspec.pattern import RegexPattern

    spec = _spec(list(lines))
    regexes = [
        _NAMED_GROUP.sub("(?:", pattern.regex.pattern)
        for pattern in spec.patterns
        if isinstance(pattern, RegexPattern)
        and pattern.include is not None
        and pattern.regex is not None
    ]
    if not regexes:
        return None
    return _Layer(base, spec, _union(regexes))


@dataclass(frozen=True)
class IgnoreRules:
    """The layers in force in one directory of a walk, shallowest first. Immutable: entering a
    directory makes a new value, so siblings never see each other's `.gitignore`."""

    layers: tuple[_Layer, ...] = ()

    def with_patterns(self, base: str, lines: Iterable[str]) -> IgnoreRules:
        """These rules plus patterns relative to `base` (a directory relative to the walk's root,
        "" for the root; patterns given later override earlier ones)."""
        layer = _layer(base + "/" if base else "", lines)
        return self if layer is None else IgnoreRules((*self.layers, layer))

    def with_gitignore_of(self, base: str, directory: int) -> IgnoreRules:
        """These rules plus the `.gitignore` in the directory open as `directory`, if it has one
        that is a regular file of at most `GITIGNORE_MAX_BYTES` (anything else is skipped,
        never waited on)."""
        data = read_regular(GITIGNORE, GITIGNORE_MAX_BYTES, dir_fd=directory)
        if not isinstance(data, bytes):
            return self
        return self.with_patterns(base, data.decode("utf-8", errors="replace").splitlines())

    def ignored(self, path: str, is_dir: bool) -> bool:
        """Whether `path` (relative to the walk's root, "/"-separated) is ignored."""
        for layer in reversed(self.layers):
            base = layer.base
            if base and not path.startswith(base):
                continue
            relative = path[len(base) :] if base else path
            if is_dir:
                relative += "/"
            if layer.prefilter.match(relative) is None:
                continue
            decision = layer.spec.check_file(relative).include
            if decision is not None:
                return decision
        return False
