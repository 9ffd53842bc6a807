"""`list_directory`: the entries of one directory, confined, `.gitignore` honoured, capped.

Blocking (a worker thread runs it). Directories come first, then the rest, each by name; a
symlink is shown as one and never followed, so listing reveals nothing outside the roots. The
directory is scanned through the descriptor `tree.open_tree` opened beneath the roots.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Final, Literal

import msgspec
from msgspec import Meta

from .arguments import Arguments
from .base import ToolError
from .ignore import IgnoreRules
from .tree import (
    DEFAULT_LIMITS,
    SKIPPED_DIRECTORIES,
    TreeLimits,
    TreeResult,
    capped_note,
    open_tree,
    scan,
)

KIND: Final = "read"

DirectoryPath = Annotated[
    str,
    Meta(
        min_length=1,
        description="The directory: absolute, or relative to the working directory.",
    ),
]
IgnorePatterns = Annotated[
    list[str],
    Meta(description='Extra .gitignore-style patterns of entries to leave out, e.g. ["*.log"].'),
]


class ListDirectoryArgs(Arguments):
    path: DirectoryPath
    ignore: IgnorePatterns = msgspec.field(default_factory=list)


DESCRIPTION: Final = (
    "List the entries of a directory: each one's name, type (dir, file, symlink, other) and "
    "size in bytes for files. Directories come first, then the rest, each sorted by name. "
    "Entries ignored by .gitignore, and those matching the optional `ignore` patterns, are "
    "left out (the result says how many); so is `.git`. Long listings are capped, with a note."
)

EntryType = Literal["dir", "file", "symlink", "other"]


def _entry_type(is_dir: bool, is_file: bool, is_symlink: bool) -> EntryType:
    if is_symlink:
        return "symlink"
    return "dir" if is_dir else "file" if is_file else "other"


def _line(name: str, kind: EntryType, size: int | None) -> str:
    if kind == "dir":
        return f"[dir]  {name}/"
    if kind == "file":
        return f"[file] {name} ({size} bytes)"
    return f"[{kind}] {name}"


def _entries(
    directory: int, relative: str, rules: IgnoreRules
) -> tuple[list[tuple[str, EntryType, int | None]], int]:
    """The shown entries of the directory open as `directory`, and how many were ignored."""
    entries: list[tuple[str, EntryType, int | None]] = []
    hidden = 0
    for entry in scan(directory):
        if entry.name in SKIPPED_DIRECTORIES:
            continue
        try:
            is_symlink = entry.is_symlink()
            is_dir = entry.is_dir(follow_symlinks=False)
            is_file = entry.is_file(follow_symlinks=False)
            kind = _entry_type(is_dir, is_file, is_symlink)
            size = entry.stat(follow_symlinks=False).st_size if kind == "file" else None
        except OSError:
            continue
        child = f"{relative}/{entry.name}" if relative else entry.name
        if rules.ignored(child, is_dir):
            hidden += 1
            continue
        entries.append((entry.name, kind, size))
    return entries, hidden


def list_directory(
    args: ListDirectoryArgs,
    cwd: Path,
    additional_directories: Sequence[Path],
    limits: TreeLimits = DEFAULT_LIMITS,
    *,
    credentials: Path | None = None,
) -> TreeResult:
    """The listing of `args.path`, or `PathRefused` / `ToolError` naming it."""
    with open_tree(args.path, cwd, additional_directories, credentials) as tree:
        if not tree.is_directory:
            raise ToolError(f"{args.path} is not a directory")
        relative = tree.top_relative
        rules = tree.starting_rules().with_gitignore_of(relative, tree.top_fd)
        rules = rules.with_patterns(relative, args.ignore)
        entries, hidden = _entries(tree.top_fd, relative, rules)
    entries.sort(key=lambda item: (item[1] != "dir", item[0]))
    shown = entries[: limits.list_entries]
    notes = []
    if hidden:
        notes.append(f"[{hidden} ignored entries not shown]")
    if len(shown) < len(entries):
        notes.append(
            capped_note(len(shown), len(entries), "entries", "list a subdirectory, or use glob")
        )
    lines = [_line(name, kind, size) for name, kind, size in shown] or ["(empty directory)"]
    raw: dict[str, Any] = {
        "path": str(tree.top),
        "entries": [
            {"name": name, "type": kind, **({} if size is None else {"size": size})}
            for name, kind, size in shown
        ],
        "ignored": hidden,
        "truncated": len(shown) < len(entries),
    }
    return TreeResult(
        "\n".join([*lines, *notes]),
        [],
        len(shown) < len(entries),
        raw,
    )
