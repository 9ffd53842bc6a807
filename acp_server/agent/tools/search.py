"""`glob` and `grep`: finding files and lines in the session's directories (blocking: threads).

Both walk the tree with `tree.walk_files` (confined, `.gitignore` honoured, `.git` skipped).
`grep` reads each file once, whole, and finds its matching lines with RE2 (`core.line_regex`:
linear time, the GIL released) before it splits anything into lines; it skips binary files (a
NUL byte, as git and ripgrep decide) and files over the size cap, stops reading files at
`maxResults`, and calls its `checkpoint` between files and pieces of a file, where a cancelled
call stops.
"""

from __future__ import annotations

import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Final

from msgspec import UNSET, Meta, UnsetType

from ...core.acp_updates import ToolCallLocation
from ...core.line_regex import LineRegex, PathRegex, PatternError
from ..confinement import non_regular_kind
from .arguments import Arguments
from .base import ToolError
from .globs import GlobError, compile_glob
from .tree import (
    DEFAULT_LIMITS,
    Tree,
    TreeFile,
    TreeLimits,
    TreeResult,
    capped_note,
    open_tree,
    walk_files,
)

GLOB_KIND: Final = "search"
GREP_KIND: Final = "search"


GlobRoot = Annotated[
    str,
    Meta(
        min_length=1,
        description="The directory to search, absolute or relative to the working directory "
        "(default: the working directory).",
    ),
]
GrepRoot = Annotated[
    str,
    Meta(
        min_length=1,
        description="The directory or file to search, absolute or relative to the working "
        "directory (default: the working directory).",
    ),
]
GlobPattern = Annotated[
    str,
    Meta(
        min_length=1,
        description='A glob over paths relative to `path`, e.g. "**/*.py" or "src/*.{ts,tsx}".',
    ),
]
Regex = Annotated[
    str,
    Meta(
        min_length=1,
        description="A regular expression (RE2 syntax: Python's without backreferences or "
        "lookaround), matched per line.",
    ),
]
FileFilter = Annotated[
    str,
    Meta(
        min_length=1,
        description='Only search files matching this glob, e.g. "*.py" (a pattern without "/" '
        "matches file names at any depth).",
    ),
]
ContextLines = Annotated[
    int, Meta(ge=0, le=20, description="Lines to show before and after each match (default 0).")
]


class GlobArgs(Arguments):
    pattern: GlobPattern
    path: GlobRoot = "."


class GrepArgs(Arguments):
    pattern: Regex
    path: GrepRoot = "."
    glob: FileFilter | UnsetType = UNSET
    ignore_case: Annotated[bool, Meta(description="Match regardless of case.")] = False
    context_lines: ContextLines = 0
    max_results: Annotated[
        int,
        Meta(ge=1, le=TreeLimits.grep_max_matches, description="The most matches (default 100)."),
    ] = TreeLimits.grep_default_matches


GLOB_DESCRIPTION: Final = (
    "Find files by path pattern, e.g. `**/*.py` or `src/**/test_*.ts` (`*` stays within one "
    "directory, `**` spans any number, `{a,b}` is either). Paths are relative to `path` "
    "(default: the working directory) and listed newest first. Files ignored by .gitignore "
    "are left out; long results are capped, with a note."
)
GREP_DESCRIPTION: Final = (
    "Search file contents with a regular expression (RE2 syntax: Python's without "
    "backreferences or lookaround; matched line by line). "
    "Each match is shown as `path:line:text`, with `contextLines` lines around it as "
    "`path-line-text`. `path` is a directory or a file (default: the working directory); "
    '`glob` keeps only matching files (e.g. "*.py"). Files ignored by .gitignore and binary '
    "files are skipped. At most `maxResults` matches (default 100) are shown, with a note "
    "when there are more."
)


# ---------------------------------------------------------------------------------------------
# glob


def _relative_pattern(pattern: str, tree: Tree, raw_path: str) -> str:
    """`pattern` relative to the walk's start; an absolute one must lie below it."""
    if not pattern.startswith("/"):
        return pattern
    prefix = f"{tree.top}/"
    if pattern.startswith(prefix):
        return pattern[len(prefix) :]
    raise ToolError(
        f"the pattern {pattern!r} is absolute but not below {raw_path}: give the directory "
        "as `path` and a pattern relative to it"
    )


def _glob_filter(pattern: str) -> PathRegex:
    """`pattern` compiled, or a `ToolError` saying why it cannot be."""
    try:
        return compile_glob(pattern)
    except GlobError as exc:
        raise ToolError(str(exc)) from None


def glob(
    args: GlobArgs,
    cwd: Path,
    additional_directories: Sequence[Path],
    limits: TreeLimits = DEFAULT_LIMITS,
    *,
    credentials: Path | None = None,
) -> TreeResult:
    """The files below `args.path` matching `args.pattern`, newest first (ties by path)."""
    with open_tree(args.path, cwd, additional_directories, credentials) as tree:
        if not tree.is_directory:
            raise ToolError(f"{args.path} is not a directory")
        keep = _glob_filter(_relative_pattern(args.pattern, tree, args.path))
        mtime_ns = tree.mtime_ns
        found = [
            (mtime_ns(file), relative)
            for file, relative in walk_files(tree, tree.starting_rules(), keep)
        ]
    found.sort(key=lambda item: (-item[0], item[1]))
    shown = found[: limits.glob_paths]
    paths = [tree.shown(relative) for _, relative in shown]
    truncated = len(shown) < len(found)
    lines = paths or [f"No files match {args.pattern!r} in {args.path}."]
    if truncated:
        lines.append(
            capped_note(len(shown), len(found), "files, newest first", "narrow the pattern")
        )
    return TreeResult(
        "\n".join(lines),
        [],
        truncated,
        {"paths": paths, "count": len(found), "truncated": truncated},
    )


# ---------------------------------------------------------------------------------------------
# grep


def compile_regex(pattern: str, ignore_case: bool) -> LineRegex:
    """`pattern` compiled, or a `ToolError` saying where it is wrong or what RE2 lacks."""
    try:
        return LineRegex(pattern, ignore_case=ignore_case)
    except PatternError as exc:
        raise ToolError(str(exc)) from None


def _carry_on() -> None:
    """The checkpoint of a grep nothing cancels."""


def _clip(line: str, cap: int) -> str:
    return line if len(line) <= cap else f"{line[:cap]} [... {len(line) - cap} more characters]"


class _Grep:
    """One grep call's state: what it found so far, and whether it has seen enough."""

    def __init__(
        self,
        tree: Tree,
        regex: LineRegex,
        args: GrepArgs,
        limits: TreeLimits,
        checkpoint: Callable[[], None],
    ) -> None:
        self.tree = tree
        self.regex = regex
        self.checkpoint = checkpoint
        self.context = args.context_lines
        self.max_results = args.max_results
        self.limits = limits
        self.lines: list[str] = []
        self.locations: list[ToolCallLocation] = []
        self.matches = 0
        self.more = False
        self.files_with_matches = 0
        self.skipped_large = 0

    def search(self, file: TreeFile, relative: str) -> None:
        """Search one file (`relative` to `tree.root`); sets `more` when a match beyond
        `maxResults` exists."""
        data = self.tree.read(file, self.limits.file_bytes)
        if data is None:
            return
        if isinstance(data, int):
            self.skipped_large += 1
            return
        if b"\0" in data:
            return  # binary
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = data.decode("utf-8", errors="replace")
            data = text.encode()  # what is matched is what is shown: U+FFFD for a bad byte
        if "\r" in text:
            # Lines end at "\n"; a CRLF file's "\r" must not stop `$` matching at line ends.
            text = text.replace("\r\n", "\n")
            data = text.encode()
        room = self.max_results - self.matches
        # One more than there is room for says whether more matched.
        hits = self.regex.lines(data, room + 1, self.checkpoint)
        if not hits:
            return
        if len(hits) > room:
            self.more = True
            hits = hits[:room]
        if not hits:
            return
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()  # a final "\n" ends the last line, it does not start another
        self.files_with_matches += 1
        self.matches += len(hits)
        self._show(lines, hits, self.tree.shown(relative), self.tree.absolute(relative))

    def _show(self, lines: list[str], hits: list[int], shown: str, location: str) -> None:
        hit_set = set(hits)
        last = -1
        for hit in hits:
            start = max(hit - self.context, last + 1)
            end = min(hit + self.context, len(lines) - 1)
            # "--" parts groups that are not adjacent, in this file or after another file's.
            if self.context and self.lines and (last < 0 or start > last + 1):
                self.lines.append("--")
            for index in range(start, end + 1):
                if index <= last:
                    continue
                separator = ":" if index in hit_set else "-"
                text = _clip(lines[index], self.limits.line_chars)
                self.lines.append(f"{shown}{separator}{index + 1}{separator}{text}")
            last = max(last, end)
            self.locations.append(ToolCallLocation(location, hit + 1))


def grep(
    args: GrepArgs,
    cwd: Path,
    additional_directories: Sequence[Path],
    limits: TreeLimits = DEFAULT_LIMITS,
    *,
    checkpoint: Callable[[], None] = _carry_on,
    credentials: Path | None = None,
) -> TreeResult:
    """The lines matching `args.pattern` below `args.path` (a directory or one file).

    `checkpoint` is called before each file and each piece of a file; what it raises (a
    cancelled worker thread's `anyio.from_thread.check_cancelled`) ends the call."""
    regex = compile_regex(args.pattern, args.ignore_case)
    with open_tree(args.path, cwd, additional_directories, credentials) as tree:
        state = _Grep(tree, regex, args, limits, checkpoint)
        mode = tree.top_mode
        if not stat.S_ISDIR(mode) and (kind := non_regular_kind(mode)) is not None:
            raise ToolError(f"refused: {args.path} is {kind}, not a regular file or a directory")
        if stat.S_ISREG(mode):
            state.search(tree.top_file(), tree.top_relative)
        else:
            keep = None if args.glob is UNSET else _glob_filter(args.glob)
            by_name = args.glob is not UNSET and "/" not in args.glob
            for file, relative in walk_files(tree, tree.starting_rules(), keep, by_name):
                checkpoint()
                state.search(file, relative)
                if state.more:
                    break
    notes = []
    if state.more:
        notes.append(
            capped_note(
                state.matches, None, "matches", "narrow the pattern or path, or raise maxResults"
            )
        )
    if state.skipped_large:
        notes.append(
            f"[{state.skipped_large} files over {limits.file_bytes} bytes were not searched]"
        )
    lines = state.lines or [f"No matches for {args.pattern!r} in {args.path}."]
    return TreeResult(
        "\n".join([*lines, *notes]),
        state.locations,
        state.more,
        {
            "matches": state.matches,
            "files": state.files_with_matches,
            "truncated": state.more,
        },
    )
