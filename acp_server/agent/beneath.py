"""Opening a path beneath the session's directories in one step, so no check can race its open.

Checking a path (`os.path.realpath`, then "is it inside?") and opening it later are two steps:
a directory swapped for a symlink in between leads the open out of the session. Here the check
*is* the open. `Roots` holds the session's directories as open descriptors, and `Roots.open`
resolves a path from the descriptor of the root it starts in, in one of two ways:

- `openat2(2)` with `RESOLVE_BENEATH` (Linux 5.6+): the kernel resolves the whole path and fails
  with `EXDEV` instead of leaving the root (a `..` above it, an absolute symlink). Python has no
  binding, so it is called through `ctypes` (`syscall(437, ...)`).
- a walk, one component at a time, each opened with `O_NOFOLLOW` relative to the descriptor of
  the directory before it; a symlink met on the way is read (`readlink`) and its target resolved
  by hand, by the same rules, at most `MAX_LINKS` of them. The walk is used where `openat2` is
  missing (`ENOSYS`) or refused (`EPERM`, a seccomp filter), and for what `RESOLVE_BENEATH`
  refuses but the SPEC allows: a symlink that leads, absolutely or through `..`, to a place that
  is still inside one of the roots (possibly another root).

Either way every directory is entered through a descriptor that was itself opened beneath a
root, so whatever the path becomes while it is resolved, what is opened lies inside the roots;
a path that leads out raises `Escape`, naming where it led. Symlinks that stay inside are
followed (SPEC 4.3: only a path that resolves outside is refused), unless `follow=False`.

Linux only (`O_PATH`, `/proc/self/fd`); blocking: callers run it in worker threads.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Self

MAX_LINKS: Final = 40
"""The most symlinks one resolution follows (Linux's own limit); then `ELOOP`."""

_SYS_OPENAT2: Final = 437  # the same number on every Linux architecture
_RESOLVE_NO_MAGICLINKS: Final = 0x02
_RESOLVE_NO_SYMLINKS: Final = 0x04
_RESOLVE_BENEATH: Final = 0x08
_DIRECTORY_FLAGS: Final = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_PROBE_FLAGS: Final = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
_MAKE_RETRIES: Final = 8
"""How often a missing parent is made again when it keeps vanishing (someone races us)."""


class Escape(OSError):
    """The path leads out of every root; `where` is the absolute path it led to."""

    def __init__(self, where: str) -> None:
        super().__init__(errno.EXDEV, "outside the session's directories")
        self.where = where


class Changed(OSError):
    """The file at a path was replaced between two opens of it (raised by the callers that
    open a path twice: `O_PATH` to check its type, then for real)."""

    def __init__(self) -> None:
        super().__init__(errno.ESTALE, "it changed while it was being opened")


class _OpenHow(ctypes.Structure):
    _fields_ = [
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    ]


class _Openat2:
    """`openat2(2)` through `ctypes`, or nothing once the kernel said it has none."""

    def __init__(self) -> None:
        self.usable = True
        try:
            self._syscall = ctypes.CDLL(None, use_errno=True).syscall
        except (OSError, AttributeError):
            self.usable = False
            return
        self._syscall.restype = ctypes.c_long

    def __call__(self, dir_fd: int, path: str, flags: int, mode: int, resolve: int) -> int:
        # A mode is an error (EINVAL) unless the open may create a file.
        creates = flags & os.O_CREAT or flags & os.O_TMPFILE == os.O_TMPFILE
        how = _OpenHow(flags, mode if creates else 0, resolve)
        fd = self._syscall(
            ctypes.c_long(_SYS_OPENAT2),
            ctypes.c_int(dir_fd),
            ctypes.c_char_p(os.fsencode(path)),
            ctypes.byref(how),
            ctypes.c_size_t(ctypes.sizeof(how)),
        )
        if fd < 0:
            code = ctypes.get_errno()
            if code == errno.ENOSYS:
                self.usable = False
            raise OSError(code, os.strerror(code))
        return int(fd)


openat2: Final = _Openat2()
"""The process's `openat2`; tests set `openat2.usable = False` to force the walk."""

_WALK_INSTEAD: Final = frozenset(
    {errno.EXDEV, errno.ELOOP, errno.EAGAIN, errno.ENOSYS, errno.EPERM}
)
"""`openat2` errors the walk settles: an escape or a symlink it may still allow, a race the
kernel noticed, or no `openat2` at all."""


def _parts(path: str) -> list[str]:
    """The components of a path, `.` and empty ones dropped, `..` kept."""
    return [part for part in path.split("/") if part not in ("", ".")]


def _joined(parts: Sequence[str]) -> str:
    return "/" + "/".join(parts)


@dataclass(frozen=True)
class Root:
    """One session directory: its resolved path, the spellings a path may start with, and its
    descriptor (`O_PATH`), or the error that kept it from being opened."""

    path: str
    spellings: tuple[tuple[str, ...], ...]
    fd: int
    error: OSError | None = None

    def descriptor(self) -> int:
        if self.error is not None:
            raise self.error
        return self.fd


class Roots:
    """The session's directories, opened; close it (it is a context manager) when done.

    `directories` are absolute; each is resolved (`realpath`: the session's own configuration,
    not something the model controls) and opened once. A path may name a root by the spelling
    it was given or by its resolved one.
    """

    def __init__(self, directories: Sequence[str | os.PathLike[str]]) -> None:
        self.roots: list[Root] = []
        for directory in dict.fromkeys(os.fspath(d) for d in directories):
            resolved = os.path.realpath(directory)
            spellings = tuple(dict.fromkeys((tuple(_parts(directory)), tuple(_parts(resolved)))))
            try:
                fd = os.open(resolved, _DIRECTORY_FLAGS & ~os.O_NOFOLLOW)
            except OSError as exc:
                self.roots.append(Root(resolved, spellings, -1, exc))
                continue
            self.roots.append(Root(resolved, spellings, fd))

    @property
    def paths(self) -> list[str]:
        """The roots' resolved paths."""
        return [root.path for root in self.roots]

    def close(self) -> None:
        for root in self.roots:
            if root.error is None:
                os.close(root.fd)
        self.roots = []

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -----------------------------------------------------------------------------------------

    def open(
        self,
        path: str,
        flags: int,
        mode: int = 0o666,
        *,
        follow: bool = True,
        make_parents: bool = False,
    ) -> tuple[int, str]:
        """A descriptor for the absolute `path` opened with `flags` beneath the roots, and the
        resolved path it names. `follow=False` refuses every symlink (`ELOOP`);
        `make_parents` makes missing directories on the way (inside the roots, as the rest).

        `Escape` when the path leads out of the roots; any other `OSError` as `open` gives it.
        (An open may be made twice, by `openat2` then by the walk: `O_EXCL` is not for here.)
        """
        root, rest = self._locate(_parts(path), path)
        if openat2.usable:
            resolve = _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS
            if not follow:
                resolve |= _RESOLVE_NO_SYMLINKS
            try:
                fd = openat2(root.descriptor(), "/".join(rest) or ".", flags, mode, resolve)
            except OSError as exc:
                walk = exc.errno in _WALK_INSTEAD or (make_parents and exc.errno == errno.ENOENT)
                if not walk or (exc.errno == errno.ELOOP and not follow):
                    raise
            else:
                where = _where(fd, root, rest, follow)
                if where is not None:
                    return fd, where
                os.close(fd)
        opened = _Walk(self, root, rest, follow).run(flags, mode, make_parents)
        assert opened[0] is not None
        return opened[0], opened[1]

    def resolve(self, path: str) -> str:
        """What the absolute `path` resolves to beneath the roots, as `realpath` would say: the
        part that exists resolved (symlinks included), a missing rest appended as it is.
        `Escape` when it leads out of the roots."""
        root, rest = self._locate(_parts(path), path)
        return _Walk(self, root, rest, follow=True).run(None, 0, False)[1]

    def _locate(self, parts: list[str], path: str) -> tuple[Root, list[str]]:
        """The deepest root the path starts in, and the rest of it; `Escape` when none.

        The part before the root is compared as spelled; a path that matches no root as spelled
        is compared again with its `..` folded (components outside the roots are not ours to
        resolve).
        """
        for candidate in (parts, _parts(os.path.normpath(_joined(parts)))):
            best: tuple[int, Root] | None = None
            for root in self.roots:
                for spelling in root.spellings:
                    size = len(spelling)
                    fits = tuple(candidate[:size]) == spelling
                    if fits and (best is None or size > best[0]):
                        best = (size, root)
            if best is not None:
                return best[1], candidate[best[0] :]
        raise Escape(os.path.normpath(_joined(parts)) if parts else path)


def _where(fd: int, root: Root, rest: list[str], follow: bool) -> str | None:
    """The resolved path of what `openat2` opened, or None when it cannot be told."""
    if not follow:
        # No symlink was crossed and `..` never left the root: the lexical answer is exact.
        return os.path.normpath(_joined([*_parts(root.path), *rest]))
    try:
        where = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
    inside = where == root.path or where.startswith(root.path.rstrip("/") + "/")
    return where if inside else None


class _Walk:
    """One resolution by hand: a stack of directory descriptors below a root, and the
    components still to resolve (reversed: the next one is last)."""

    def __init__(self, roots: Roots, root: Root, rest: list[str], follow: bool) -> None:
        self.roots = roots
        self.root = root
        self.pending = list(reversed(rest))
        self.follow = follow
        self.stack: list[int] = []
        self.names: list[str] = []
        self.links = 0

    def run(self, flags: int | None, mode: int, make_parents: bool) -> tuple[int | None, str]:
        """Open (with `flags`), or with `flags` None only resolve, the path."""
        try:
            return self._run(flags, mode, make_parents)
        finally:
            for fd in self.stack:
                os.close(fd)

    def where(self, *more: str) -> str:
        return _joined([*_parts(self.root.path), *self.names, *more])

    def _run(self, flags: int | None, mode: int, make_parents: bool) -> tuple[int | None, str]:
        made = 0
        while True:
            current = self.stack[-1] if self.stack else self.root.descriptor()
            if not self.pending:
                if flags is None:
                    return None, self.where()
                return os.open(".", flags, mode, dir_fd=current), self.where()
            name = self.pending.pop()
            if name in ("", "."):
                continue
            if name == "..":
                self._up()
                continue
            last = not self.pending
            if not last:
                opening = _DIRECTORY_FLAGS
            elif flags is None:
                opening = _PROBE_FLAGS
            else:
                opening = flags | os.O_NOFOLLOW
            try:
                fd = os.open(name, opening, mode, dir_fd=current)
            except OSError as exc:
                if exc.errno in (errno.ENOTDIR, errno.ELOOP, errno.EEXIST):
                    target = _link_text(name, current)
                    if target is not None:
                        self._splice(target)
                        continue
                if flags is None:
                    # As realpath: a rest that cannot be resolved is kept as it is spelled.
                    rest = [name, *reversed(self.pending)]
                    return None, os.path.normpath(self.where(*rest))
                if exc.errno == errno.ENOENT and make_parents and not last:
                    made += 1
                    if made > _MAKE_RETRIES:
                        raise
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(name, 0o777, dir_fd=current)
                    self.pending.append(name)
                    continue
                raise
            # An `O_PATH | O_NOFOLLOW` open of a symlink opens the link itself.
            if last and opening & os.O_PATH and stat.S_ISLNK(os.fstat(fd).st_mode):
                target = os.readlink("", dir_fd=fd)
                os.close(fd)
                self._splice(target)
                continue
            if not last:
                self.stack.append(fd)
                self.names.append(name)
                continue
            if flags is None:
                os.close(fd)
                return None, self.where(name)
            return fd, self.where(name)

    def _up(self) -> None:
        """`..`: back to the directory above, which may be in another root or in none."""
        if self.stack:
            os.close(self.stack.pop())
            self.names.pop()
            return
        parent = os.path.dirname(self.root.path)
        self._restart([*_parts(parent), *reversed(self.pending)])

    def _splice(self, target: str) -> None:
        """Continue with a symlink's `target` in place of the link."""
        if not self.follow:
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP))
        self.links += 1
        if self.links > MAX_LINKS:
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP))
        if target.startswith("/"):
            self._restart([*_parts(target), *reversed(self.pending)])
        else:
            self.pending.extend(reversed(_parts(target)))

    def _restart(self, parts: list[str]) -> None:
        """Resolve the absolute `parts` from the root they start in (`Escape` when none)."""
        for fd in self.stack:
            os.close(fd)
        self.stack = []
        self.names = []
        self.root, rest = self.roots._locate(parts, _joined(parts))
        self.pending = list(reversed(rest))


def _link_text(name: str, dir_fd: int) -> str | None:
    """The target of the symlink `name`, or None when it is not (or no longer) one."""
    try:
        return os.readlink(name, dir_fd=dir_fd)
    except OSError:
        return None
