"""The confined tree walk beneath `list_directory`, `glob` and `grep` (blocking: worker threads).

A walk starts at a path opened beneath the session's roots (`confinement.open_local`), and never
leaves them: each directory is opened beneath the roots by its path, refusing any symlink on
the way (so one swapped in mid-walk is not entered, and there are no cycles), each file is
opened `O_NOFOLLOW` relative to its directory's descriptor, and a symlinked file is taken only
when it leads, beneath the roots, to a regular file (and is then opened that way).
The stored credentials' directory is never entered, even when the roots hold it.
`.git` is skipped and `.gitignore` files are honoured (`ignore`), ignored directories pruned
before they are scanned. Entries come sorted by name within each directory, so the order of
results is the same on every run and every machine.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from ...core.acp_updates import ToolCallLocation
from ..confinement import SessionRoots, is_inside, local_roots, open_local, resolve
from .base import ToolError
from .ignore import GITIGNORE, IgnoreRules
from .regular import read_open_regular, read_regular

if TYPE_CHECKING:  # RE2 is loaded by the first pattern, not by loading the tools
    from ...core.line_regex import PathRegex

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


class TreeFile(NamedTuple):
    """A file a walk took: `name` in the directory open as `directory`, which stays open only
    until the walk moves on (use it at once). A symlink to a regular file inside the roots has
    `link`, the absolute path to open it by, beneath the roots."""

    directory: int
    name: str
    link: str | None = None


@dataclass
class Tree:
    """Where a walk starts, inside which session root, and how its paths are shown; it holds
    the session's roots open (`handles`), so close it (it is a context manager)."""

    top: Path
    """The resolved, checked start of the walk (a directory, or for `grep` a file)."""
    root: Path
    """The deepest session root that contains `top` (resolved); walk paths are relative to it."""
    handles: SessionRoots
    top_mode: int
    """`top`'s `st_mode`, from the descriptor it was opened as."""
    top_fd: int
    """A descriptor for `top` when it is a directory (`O_RDONLY`), else -1."""
    cwd: Path
    """The resolved `cwd`: paths below it are shown relative to it, others absolute."""

    @property
    def credentials(self) -> Path | None:
        """The stored credentials' directory (resolved): neither entered nor read through a
        link; None when there is none to keep out."""
        return self.handles.credentials

    def close(self) -> None:
        if self.top_fd >= 0:
            os.close(self.top_fd)
            self.top_fd = -1
        self.handles.close()

    def __enter__(self) -> Tree:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def is_directory(self) -> bool:
        return stat.S_ISDIR(self.top_mode)

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

    def open_directory(self, relative: str) -> int:
        """A descriptor (`O_RDONLY`) for the walk's directory `relative` (to `root`), opened
        beneath the roots without following any symlink: the walk entered only directories,
        so a symlink on the way was swapped in since (`OSError`)."""
        if relative == self.top_relative and self.top_fd >= 0:
            return os.dup(self.top_fd)
        fd, _ = self.handles.open(self.absolute(relative), _DIRECTORY_FLAGS, follow=False)
        return fd

    def _is_credentials(self, where: Path) -> bool:
        return self.credentials is not None and is_inside(where, self.credentials)

    def linked_file(self, path: str) -> bool:
        """Whether the symlink at `path` leads, beneath the roots, to a regular file outside
        the credentials' directory."""
        try:
            fd, where = self.handles.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            regular = stat.S_ISREG(os.fstat(fd).st_mode)
        finally:
            os.close(fd)
        return regular and not self._is_credentials(Path(where))

    def read(self, file: TreeFile, cap: int) -> bytes | int | None:
        """`file`'s bytes, its size when that is over `cap` (unread), or None when it is no
        longer a readable regular file inside the roots."""
        if file.link is None:
            return read_regular(file.name, cap, dir_fd=file.directory)
        try:
            fd, where = self.handles.open(file.link, _READ_FLAGS)
        except OSError:
            return None
        if self._is_credentials(Path(where)):
            os.close(fd)
            return None
        return read_open_regular(fd, cap)

    def mtime_ns(self, file: TreeFile) -> int:
        """`file`'s modification time (its target's, for a link); 0 when it cannot be told."""
        try:
            if file.link is None:
                return os.stat(file.name, dir_fd=file.directory, follow_symlinks=False).st_mtime_ns
            fd, _ = self.handles.open(file.link, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return 0
        try:
            return os.fstat(fd).st_mtime_ns
        finally:
            os.close(fd)

    def top_file(self) -> TreeFile:
        """`top`, a regular file, as a walk would yield it."""
        return TreeFile(-1, self.top.name, str(self.top))

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
        base = ""
        for index, part in enumerate(parts):
            rules = self._with_gitignore_of(rules, base)
            base = "/".join(parts[: index + 1])
            is_dir = index < len(parts) - 1 or self.is_directory
            if part in SKIPPED_DIRECTORIES or rules.ignored(base, is_dir):
                return IgnoreRules()
        return rules

    def _with_gitignore_of(self, rules: IgnoreRules, relative: str) -> IgnoreRules:
        try:
            fd = self.open_directory(relative)
        except OSError:
            return rules
        try:
            return rules.with_gitignore_of(relative, fd)
        finally:
            os.close(fd)


def open_tree(
    raw: str,
    cwd: Path,
    additional_directories: Sequence[Path],
    credentials: Path | None = None,
) -> Tree:
    """The `Tree` for the tool path `raw`, or `PathRefused` / `ToolError` naming `raw`.

    `top` is opened beneath the roots `O_PATH` first (which opens neither a FIFO nor a
    device), and a directory is then opened through that descriptor: what was checked is what
    is walked.
    """
    try:
        handles = local_roots(cwd, additional_directories, credentials)
    except OSError as exc:
        raise ToolError(f"cannot open {raw}: {exc.strerror or exc}") from None
    try:
        try:
            probe, top = open_local(handles, raw, cwd, os.O_PATH | os.O_CLOEXEC)
        except FileNotFoundError:
            raise ToolError(f"{raw} does not exist") from None
        except OSError as exc:
            raise ToolError(f"cannot open {raw}: {exc.strerror or exc}") from None
        try:
            mode = os.fstat(probe).st_mode
            top_fd = os.open(".", _DIRECTORY_FLAGS, dir_fd=probe) if stat.S_ISDIR(mode) else -1
        except OSError as exc:
            raise ToolError(f"cannot open {raw}: {exc.strerror or exc}") from None
        finally:
            os.close(probe)
        roots = [Path(path) for path in handles.paths]
        root = max((r for r in roots if is_inside(top, r)), key=lambda r: len(r.parts))
        return Tree(top, root, handles, mode, top_fd, resolve(cwd))
    except BaseException:
        handles.close()
        raise


_BY_NAME: Final = attrgetter("name")
_DIRECTORY_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NONBLOCK | os.O_CLOEXEC
_READ_FLAGS: Final = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC


def scan(directory: int) -> list[os.DirEntry[str]]:
    """The entries of the directory open as `directory`, sorted by name; an unreadable
    directory has none."""
    try:
        with os.scandir(directory) as entries:
            return sorted(entries, key=_BY_NAME)
    except OSError:
        return []


def walk_files(
    tree: Tree, rules: IgnoreRules, keep: PathRegex | None = None, by_name: bool = False
) -> Iterator[tuple[TreeFile, str]]:
    """(file, path relative to `tree.root`) for each file the walk takes, depth first: a
    directory's files before its subdirectories, each sorted by name. A file's `directory`
    is closed when the walk moves on.

    `keep`, when given, must `fullmatch` a file's path relative to `tree.top` (its name alone
    when `by_name`); it is asked before the `.gitignore` rules, which cost more. The work is
    done a directory at a time, in list comprehensions: this loop runs once per file of a
    large tree, and is most of what `glob` costs.

    Each directory is opened beneath the roots by its path from `tree.root`, refusing any
    symlink on the way: a directory swapped for a symlink after it was scanned is skipped.
    """
    skip = len(tree.top_relative) + 1 if tree.top_relative else 0
    # The walk's paths are resolved (no symlink is entered): a plain comparison finds it.
    credentials = str(tree.credentials) if tree.credentials is not None else None
    keep_match = keep.fullmatch if keep is not None else None
    stack: list[tuple[str, IgnoreRules]] = [(tree.top_relative, rules)]
    while stack:
        relative, rules = stack.pop()
        try:
            directory = tree.open_directory(relative)
        except OSError:
            continue
        try:
            try:
                with os.scandir(directory) as scanned:
                    entries = list(scanned)
            except OSError:
                continue
            prefix = f"{relative}/" if relative else ""
            files: list[tuple[str, str | None]] = []
            subdirectories: list[str] = []
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        subdirectories.append(entry.name)
                    elif entry.is_file(follow_symlinks=False):
                        files.append((entry.name, None))
                    elif entry.is_symlink():
                        link = tree.absolute(prefix + entry.name)
                        if tree.linked_file(link):
                            files.append((entry.name, link))
                    # FIFOs, sockets, devices: nothing to list or search
                except OSError:
                    continue
            if any(name == GITIGNORE for name, link in files if link is None):
                rules = rules.with_gitignore_of(relative, directory)
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
                    name for name in subdirectories if not ignored(prefix + name, True)
                ]
            files.sort()
            for name, through in files:
                yield TreeFile(directory, name, through), prefix + name
        finally:
            os.close(directory)
        subdirectories.sort(reverse=True)  # popped from the stack in name order
        stack.extend(
            (prefix + name, rules)
            for name in subdirectories
            if name not in SKIPPED_DIRECTORIES and tree.absolute(prefix + name) != credentials
        )


def capped_note(shown: int, total: int | None, what: str, advice: str) -> str:
    """The note that says a result was capped (`total` None: at least one more exists)."""
    counted = f"the first {shown} of {total}" if total is not None else f"the first {shown}"
    return f"[capped: showing {counted} {what}; {advice}]"
