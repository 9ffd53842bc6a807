"""The confined tree walk beneath `list_directory`, `glob` and `grep` (blocking: worker threads).

A walk starts at a path that `local_path` resolved and checked, and never leaves the session's
directories: a symlinked directory is not entered (that also rules out cycles), and a symlinked
file is taken only when its target lies inside the roots (and is then read at the target).
The stored credentials' directory is never entered, even when the roots hold it.
`.git` is skipped and `.gitignore` files are honoured (`ignore`), ignored directories pruned
before they are scanned. Entries come sorted by name within each directory, so the order of
results is the same on every run and every machine.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any, Final

from ...core.acp_updates import ToolCallLocation
from ...providers.credentials import credentials_directory
from ..confinement import is_inside, local_path, resolve, resolved_roots
from .base import ToolError
from .ignore import GITIGNORE, IgnoreRules

SKIPPED_DIRECTORIES: Final = frozenset({".git"})


@dataclass(frozen=True)
class TreeLimits:
    """Caps on what one `list_directory`, `glob` or `grep` call returns."""

    list_entries: int = 1000
    glob_paths: int = 500
    grep_default_matches: int = 100
    grep_max_matches: int = 1000
    """The most `maxResults` may ask for (the argument's schema says so too)."""
    line_chars: int = 500
    """A longer matching or context line is cut (minified files are one huge line)."""
    file_bytes: int = 8 << 20
    """`grep` skips a larger file, and says so."""


DEFAULT_LIMITS: Final = TreeLimits()


@dataclass(frozen=True)
class TreeResult:
    """What a tree tool found: the model's text, the places for `locations`, and `rawOutput`."""

    text: str
    locations: list[ToolCallLocation]
    truncated: bool
    raw_output: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Tree:
    """Where a walk starts, inside which session root, and how its paths are shown."""

    top: Path
    """The resolved, checked start of the walk (a directory, or for `grep` a file)."""
    root: Path
    """The deepest session root that contains `top` (resolved); walk paths are relative to it."""
    roots: tuple[Path, ...]
    cwd: Path
    """The resolved `cwd`: paths below it are shown relative to it, others absolute."""
    credentials: Path = field(default_factory=credentials_directory)
    """The stored credentials' directory (resolved): neither entered nor read through a link."""

    @property
    def top_relative(self) -> str:
        return "" if self.top == self.root else self.top.relative_to(self.root).as_posix()

    def absolute(self, relative: str) -> str:
        return f"{self.root}/{relative}" if relative else str(self.root)

    def shown(self, relative: str) -> str:
        """How the model sees a walk path: relative to `cwd` below it, else absolute."""
        path = self.absolute(relative)
        prefix = f"{self.cwd}/" if str(self.cwd) != "/" else "/"
        if path.startswith(prefix):
            return path[len(prefix) :]
        return "." if path == str(self.cwd) else path

    def inside(self, path: str) -> bool:
        resolved = Path(path)
        return any(is_inside(resolved, root) for root in self.roots) and not is_inside(
            resolved, self.credentials
        )

    def starting_rules(self) -> IgnoreRules:
        """The `.gitignore` rules of the directories from `root` down to `top`, excluded.

        When the walk starts inside a directory those rules ignore, the caller named it on
        purpose: the rules above it are dropped, and only the `.gitignore` files from `top`
        down apply.
        """
        rules = IgnoreRules()
        relative = self.top_relative
        if not relative:
            return rules
        parts = relative.split("/")
        directory = self.root
        base = ""
        for index, part in enumerate(parts):
            rules = rules.with_gitignore_of(base, str(directory))
            base = "/".join(parts[: index + 1])
            directory = directory / part
            is_dir = index < len(parts) - 1 or self.top.is_dir()
            if part in SKIPPED_DIRECTORIES or rules.ignored(base, is_dir):
                return IgnoreRules()
        return rules


def open_tree(raw: str, cwd: Path, additional_directories: Sequence[Path]) -> Tree:
    """The `Tree` for the tool path `raw`, or `PathRefused` / `ToolError` naming `raw`."""
    top = local_path(raw, cwd, additional_directories)
    roots = tuple(resolved_roots(cwd, additional_directories))
    if not top.exists():
        raise ToolError(f"{raw} does not exist")
    root = max((r for r in roots if is_inside(top, r)), key=lambda r: len(r.parts))
    return Tree(top, root, roots, resolve(cwd))


_BY_NAME: Final = attrgetter("name")


def scan(directory: str) -> list[os.DirEntry[str]]:
    """The entries of `directory` sorted by name; an unreadable directory has none."""
    try:
        with os.scandir(directory) as entries:
            return sorted(entries, key=_BY_NAME)
    except OSError:
        return []


def walk_files(
    tree: Tree, rules: IgnoreRules, keep: re.Pattern[str] | None = None, by_name: bool = False
) -> Iterator[tuple[str, str]]:
    """(path to read, path relative to `tree.root`) for each file the walk takes, depth first:
    a directory's files before its subdirectories, each sorted by name.

    `keep`, when given, must `fullmatch` a file's path relative to `tree.top` (its name alone
    when `by_name`); it is asked before the `.gitignore` rules, which cost more. The work is
    done a directory at a time, in list comprehensions: this loop runs once per file of a
    large tree, and is most of what `glob` costs.
    """
    skip = len(tree.top_relative) + 1 if tree.top_relative else 0
    credentials = str(tree.credentials)  # the walk's paths are resolved: no symlink is entered
    keep_match = keep.fullmatch if keep is not None else None
    stack: list[tuple[str, str, IgnoreRules]] = [(str(tree.top), tree.top_relative, rules)]
    while stack:
        directory, relative, rules = stack.pop()
        try:
            with os.scandir(directory) as scanned:
                entries = list(scanned)
        except OSError:
            continue
        files: list[tuple[str, str]] = []
        subdirectories: list[tuple[str, str]] = []
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    subdirectories.append((entry.name, entry.path))
                elif entry.is_file(follow_symlinks=False):
                    files.append((entry.name, entry.path))
                elif entry.is_symlink():
                    target = os.path.realpath(entry.path)
                    if tree.inside(target) and os.path.isfile(target):
                        files.append((entry.name, target))
                # FIFOs, sockets, devices: nothing to list or search
            except OSError:
                continue
        if any(name == GITIGNORE for name, _ in files):
            rules = rules.with_gitignore_of(relative, directory)
        prefix = f"{relative}/" if relative else ""
        if keep_match is not None:
            if by_name:
                files = [file for file in files if keep_match(file[0])]
            else:
                from_top = prefix[skip:]
                files = [file for file in files if keep_match(from_top + file[0])]
        if rules.layers:
            ignored = rules.ignored
            files = [file for file in files if not ignored(prefix + file[0], False)]
            subdirectories = [
                subdirectory
                for subdirectory in subdirectories
                if not ignored(prefix + subdirectory[0], True)
            ]
        files.sort()
        for name, target in files:
            yield target, prefix + name
        subdirectories.sort(reverse=True)  # popped from the stack in name order
        stack.extend(
            (path, prefix + name, rules)
            for name, path in subdirectories
            if name not in SKIPPED_DIRECTORIES and path != credentials
        )


def capped_note(shown: int, total: int | None, what: str, advice: str) -> str:
    """The note that says a result was capped (`total` None: at least one more exists)."""
    counted = f"the first {shown} of {total}" if total is not None else f"the first {shown}"
    return f"[capped: showing {counted} {what}; {advice}]"
