"""Where the tools may touch the file system: the path rules of SPEC 4.3, kept apart from I/O.

A tool path is absolute or relative to the session's `cwd`. The session's *roots* are its `cwd`
and its `additionalDirectories`; a path is allowed only when it lies inside one of them.

Two checks exist, because two different parties own the file system:

- `local_path` and `open_local` are used when the server reads or writes the file itself. Both
  resolve beneath the roots' descriptors (`beneath.Roots`): `local_path` says early, before a
  permission question, what a path resolves to now; `open_local` is the check that counts, made
  by the open itself, so a directory swapped for a symlink in between cannot lead it out.
- `client_path` is used when every access goes through the client (`fs/read_text_file`,
  `fs/write_text_file`). The client owns that file system (it may be a different machine, or
  an editor serving unsaved buffers), so the server does not resolve symlinks there: it only
  makes the path absolute, folds `.` and `..`, and still refuses a path that lexically leaves
  the roots. That keeps what the model can name the same whichever side does the I/O (a
  deliberate choice beyond the SPEC's minimum; the client may apply stricter rules itself).

Each check also refuses the stored credentials' directory (SPEC 4.4) when it is given: the
server passes it down (`tools.KeptFromTools`), so the agent never asks the providers where it is.

Everything above `local_path` is pure and testable without a file system; `local_path`,
`open_local` and `resolved_roots` read symlinks, and `open_local` opens.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePath
from typing import NamedTuple, TypeVar

from .beneath import Escape, Roots

P = TypeVar("P", bound=PurePath)


class Directories(NamedTuple):
    """A session's directories as its tools are confined to them (the arguments of the checks
    below, in their order)."""

    cwd: Path
    additional: Sequence[Path]
    credentials: Path | None = None
    """The stored credentials' directory (resolved), refused even inside the others; None:
    nothing to keep out."""


class PathRefused(Exception):
    """A tool path the session may not use; the message names the path and says why."""


def absolute_path(raw: str, cwd: PurePath) -> Path:
    """`raw` made absolute against `cwd`, with `.` and `..` folded lexically (no symlinks)."""
    if not raw:
        raise PathRefused("the path is empty")
    if "\0" in raw:
        # The OS would reject it anyway, with a less helpful ValueError.
        raise PathRefused(f"the path {raw!r} contains a NUL character")
    return Path(os.path.normpath(os.path.join(cwd, raw)))


def is_inside(path: PurePath, root: PurePath) -> bool:
    """Whether `path` is `root` or below it. Both must be normalised (lexically or resolved).

    `PurePath.is_relative_to` compares whole components, so `/a/bc` is not inside `/a/b`.
    """
    return path.is_relative_to(root)


def ensure_inside(path: PurePath, roots: Sequence[PurePath], raw: str) -> None:
    """Raise `PathRefused` naming `raw` (and what it became) unless `path` is inside a root."""
    if any(is_inside(path, root) for root in roots):
        return
    became = "" if str(path) == raw else f" (resolved to {path})"
    allowed = ", ".join(str(root) for root in _unique(roots))
    raise PathRefused(
        f"refused: {raw}{became} is outside the session's directories (allowed: {allowed})"
    )


def non_regular_kind(mode: int) -> str | None:
    """What a `stat` mode is when it is not a regular file ("a directory", ...), else None.

    Reading a FIFO or a character device can block forever or never end (`/dev/zero`), so the
    tools refuse everything that is not a regular file before opening it.
    """
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _unique(paths: Iterable[P]) -> list[P]:
    return list(dict.fromkeys(paths))


# ---------------------------------------------------------------------------------------------
# The two checks (these read symlinks, so they belong in a worker thread).


def resolve(path: PurePath) -> Path:
    """`path` with every symlink resolved; missing trailing components are kept as they are."""
    return Path(os.path.realpath(path))


def resolved_roots(cwd: Path, additional_directories: Sequence[Path]) -> list[Path]:
    return _unique(resolve(root) for root in (cwd, *additional_directories))


def local_path(
    raw: str,
    cwd: Path,
    additional_directories: Sequence[Path],
    credentials: Path | None = None,
) -> Path:
    """The resolved path the server itself may open for `raw`, or `PathRefused`.

    Resolution starts from the joined, *un-folded* path: folding `link/..` lexically first would
    disagree with what the kernel does when `link` is a symlink.
    """
    absolute_path(raw, cwd)  # validates emptiness and NUL
    joined = os.path.join(cwd, raw)
    try:
        with local_roots(cwd, additional_directories, credentials) as roots:
            resolved = Path(roots.resolve(joined))
    except Escape as exc:
        resolved = Path(exc.where)
    except OSError:
        # Unresolvable now (a root is missing, say): the open that follows reports why.
        resolved = Path(os.path.normpath(joined))
    ensure_inside(resolved, resolved_roots(cwd, additional_directories), raw)
    ensure_not_credentials(resolved, raw, credentials)
    return resolved


class SessionRoots(Roots):
    """The session's roots opened, with the stored credentials' directory (resolved) that
    nothing opened beneath them may be in; None when there is none to keep out."""

    def __init__(self, directories: Sequence[Path], credentials: Path | None) -> None:
        super().__init__(directories)
        self.credentials = credentials


def local_roots(
    cwd: Path, additional_directories: Sequence[Path], credentials: Path | None = None
) -> SessionRoots:
    """The session's roots opened for `open_local` (close them when done)."""
    return SessionRoots([cwd, *additional_directories], credentials)


def open_local(
    roots: SessionRoots,
    raw: str,
    cwd: Path,
    flags: int,
    mode: int = 0o666,
    *,
    make_parents: bool = False,
) -> tuple[int, Path]:
    """`raw` opened with `flags` beneath `roots` (symlinks inside them followed), and the path
    it resolved to; `PathRefused` when it leads out, `OSError` as the open fails.

    `make_parents` makes missing directories on the way, beneath the roots as the rest.
    """
    absolute_path(raw, cwd)  # validates emptiness and NUL
    try:
        fd, where = roots.open(os.path.join(cwd, raw), flags, mode, make_parents=make_parents)
    except Escape as exc:
        ensure_inside(Path(exc.where), [Path(path) for path in roots.paths], raw)
        raise  # not reached: ensure_inside refuses a path inside no root
    try:
        ensure_not_credentials(Path(where), raw, roots.credentials)
    except PathRefused:
        os.close(fd)
        raise
    return fd, Path(where)


def client_path(
    raw: str,
    cwd: Path,
    additional_directories: Sequence[Path],
    credentials: Path | None = None,
) -> Path:
    """The absolute path to send to the client for `raw`, or `PathRefused` (lexical check).

    The roots are accepted both as given and resolved, so a `cwd` reached through a symlink
    (macOS's `/tmp`, say) still matches a path the model spelled with the real prefix.
    """
    path = absolute_path(raw, cwd)
    given = [absolute_path(str(root), cwd) for root in (cwd, *additional_directories)]
    ensure_inside(path, [*given, *resolved_roots(cwd, additional_directories)], raw)
    ensure_not_credentials(path, raw, credentials)
    return path


def ensure_not_credentials(path: PurePath, raw: str, credentials: Path | None) -> None:
    """Raise `PathRefused` when `path` (absolute, folded) is in the stored credentials'
    directory `credentials` (resolved): a session whose directories hold it (a `cwd` of `~`)
    reads no key through a tool, and the key never reaches the log (SPEC 4.4)."""
    if credentials is None or not is_inside(path, credentials):
        return
    became = "" if str(path) == raw else f" (resolved to {path})"
    raise PathRefused(
        f"refused: {raw}{became} is in the directory of the stored credentials ({credentials}), "
        "which no tool reads"
    )
