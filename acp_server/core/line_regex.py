"""The patterns of `grep` and `search_history` (SPEC 4.3): regular expressions matched line by
line in time linear in the text, with RE2.

Python's `re` backtracks: `(a+)+$` against a line of `a`s that ends in another character takes
time exponential in the line, inside one C call that holds the GIL, so no other thread, the
event loop included, runs until it ends and nothing can cancel it. RE2 compiles a pattern to an
automaton, never backtracks, and releases the GIL while it matches. Its syntax is Python's less
the constructs that need backtracking (backreferences, lookaround, atomic groups, possessive
repeats); a pattern it refuses is a `PatternError`, never matched with `re` instead.

A text is searched in pieces of whole lines, and a caller's `checkpoint` is called between
them: a search in a worker thread stops there when its task is cancelled.

`PathRegex` is the same engine for the expressions the tree tools match against one path at a
time: the glob patterns of `glob` and of `grep`'s filter, and the `.gitignore` rules of a walk.
Those are written by the model or by the repository, and `*a*a*a*a*a*a*a*a*b` made a Python
expression is as catastrophic against a long name of `a`s as `(a+)+$` is against a line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Protocol

import re2
from re2 import _re2

PIECE_BYTES: Final = 1 << 16
"""About how much of a text one RE2 call searches (whole lines; a longer line is one piece)."""

_UNSUPPORTED: Final = ("invalid perl operator", "invalid escape sequence")
"""RE2's reasons for refusing a construct Python's `re` has (a lookaround, a backreference, an
atomic group): said to the model as unsupported, not as malformed; and a possessive repeat
(`a*+`) is a "bad repetition operator" ending in "+"."""

_UNANCHORED: Final = _re2.RE2.Anchor.UNANCHORED
_ANCHOR_START: Final = _re2.RE2.Anchor.ANCHOR_START
_ANCHOR_BOTH: Final = _re2.RE2.Anchor.ANCHOR_BOTH
_NO_MATCH: Final = (-1, -1)


class PatternError(ValueError):
    """A pattern RE2 refuses, with a message for the model."""


class _Compiled(Protocol):
    """The extension's `RE2` object: `Match` gives the spans of the match and its groups, or
    `_NO_MATCH` for each when there is none (the GIL released while it matches)."""

    def ok(self) -> bool: ...
    def error(self) -> bytes: ...
    def Match(
        self, anchor: object, text: bytes, pos: int, endpos: int
    ) -> list[tuple[int, int]]: ...


def _carry_on() -> None:
    """The checkpoint of a search nothing cancels."""


def _message(pattern: str, reason: str) -> str:
    possessive = reason.startswith("bad repetition operator") and reason.endswith("+")
    if possessive or reason.startswith(_UNSUPPORTED):
        return (
            f"unsupported regular expression {pattern!r}: {reason} (the syntax is RE2's, "
            "matched in linear time: backreferences, lookahead, lookbehind, atomic groups "
            "and possessive repeats are not supported)"
        )
    return f"invalid regular expression {pattern!r}: {reason}"


def _compile(pattern: str, ignore_case: bool) -> _Compiled:
    options = re2.Options()
    options.log_errors = False  # RE2 would write its refusals to stderr, the server's log
    options.never_capture = True  # only where the whole match lies is asked
    options.case_sensitive = not ignore_case
    try:
        encoded = f"(?m){pattern}".encode()
    except UnicodeEncodeError:
        raise PatternError(f"invalid regular expression {pattern!r}: not valid Unicode") from None
    # The extension's object, not `re2.compile`'s wrapper: that one's module-wide cache would
    # keep up to 128 of a session's patterns, each with up to `max_mem` (8 MiB) of automaton,
    # and its `search` costs a generator and a match object a call.
    compiled: _Compiled = _re2.RE2(encoded, options)
    if not compiled.ok():
        # RE2 quotes the pattern it was given, the multi-line flag in front included.
        reason = compiled.error().decode(errors="replace").replace(f"(?m){pattern}", pattern)
        raise PatternError(_message(pattern, reason))
    return compiled


class LineRegex:
    """A pattern compiled for matching line by line: `^` and `$` at each line's ends."""

    __slots__ = ("_match", "pattern")

    def __init__(self, pattern: str, *, ignore_case: bool = False) -> None:
        self.pattern = pattern
        self._match = _compile(pattern, ignore_case).Match

    def lines(
        self, text: bytes, limit: int, checkpoint: Callable[[], None] = _carry_on
    ) -> list[int]:
        """The indexes of the lines of `text` holding a match, in order, at most `limit`.

        `text` is UTF-8 whose lines end at "\\n" (a final "\\n" ends the last line, it does not
        start another); a match must lie within one line, as when each line is searched
        alone."""
        hits: list[int] = []
        if not text:
            return hits
        match = self._match
        end = len(text) - (text[-1] == 0x0A)  # the end of the last line
        pos = 0  # the start of the first line not yet searched
        counted, line = 0, 0  # `line` is the index of the line starting at `counted`
        while pos <= end and len(hits) < limit:
            if pos:
                checkpoint()
            # The piece [pos, stop) is whole lines: the rest, or up to the end of a line.
            stop = end if end - pos <= PIECE_BYTES else text.find(b"\n", pos + PIECE_BYTES)
            stop = end if stop < 0 else stop
            while pos <= stop and len(hits) < limit:
                start, finish = match(_UNANCHORED, text, pos, stop)[0]
                if start < 0:
                    break
                first = text.rfind(b"\n", pos, start) + 1 or pos
                last = text.find(b"\n", start, stop)
                last = stop if last < 0 else last
                line += text.count(b"\n", counted, first)
                counted = first
                # A match running on past its line's end is not a match of the line; a shorter
                # one may be, starting where that one did or later (none starts earlier).
                if finish <= last or match(_UNANCHORED, text, start, last)[0] != _NO_MATCH:
                    hits.append(line)
                pos = last + 1
            pos = max(pos, stop + 1)
        return hits

    def span(self, line: str) -> tuple[int, int] | None:
        """Where the first match in `line` (no "\\n" in it) starts and ends, in characters;
        None when it has none."""
        encoded = line.encode("utf-8", errors="surrogatepass")
        start, finish = self._match(_UNANCHORED, encoded, 0, len(encoded))[0]
        if start < 0:
            return None
        first = len(encoded[:start].decode("utf-8", errors="surrogatepass"))
        return first, first + len(encoded[start:finish].decode("utf-8", errors="surrogatepass"))

    def search_lines(
        self, lines: list[str], limit: int, checkpoint: Callable[[], None] = _carry_on
    ) -> list[int]:
        """The indexes of the `lines` (no "\\n" in any) holding a match, at most `limit`."""
        if not lines:
            return []
        # Each line ends in "\n", so that an empty last line is one (`lines` reads it so).
        joined = "\n".join(lines) + "\n"
        return self.lines(joined.encode("utf-8", errors="surrogatepass"), limit, checkpoint)


class PathRegex:
    """A regular expression matched against one short text at a time (a path), anchored at its
    start (`match`) or at both ends (`fullmatch`), in time linear in the text, with RE2.

    The expression is RE2's (what the tree tools build from globs and pathspec from `.gitignore`
    lines is); one RE2 refuses is a `PatternError` holding RE2's reason. A path that is not UTF-8
    (a name read from the disk as surrogate escapes) is matched with U+FFFD for each byte that is
    not, so a wildcard still takes it as one character."""

    __slots__ = ("_match", "pattern")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        options = re2.Options()
        options.log_errors = False
        options.never_capture = True
        try:
            encoded = pattern.encode()
        except UnicodeEncodeError:
            raise PatternError("not valid Unicode") from None
        compiled: _Compiled = _re2.RE2(encoded, options)
        if not compiled.ok():
            raise PatternError(compiled.error().decode(errors="replace"))
        self._match = compiled.Match

    def match(self, text: str) -> tuple[int, int] | None:
        """The span of a match at the start of `text` (as UTF-8 offsets), or None."""
        return self._span(_ANCHOR_START, text)

    def fullmatch(self, text: str) -> tuple[int, int] | None:
        """The span of `text` (as UTF-8 offsets) when the whole of it matches, or None."""
        return self._span(_ANCHOR_BOTH, text)

    def _span(self, anchor: object, text: str) -> tuple[int, int] | None:
        try:
            encoded = text.encode()
        except UnicodeEncodeError:
            encoded = text.encode(errors="surrogateescape").decode(errors="replace").encode()
        span = self._match(anchor, encoded, 0, len(encoded))[0]
        return None if span[0] < 0 else span
