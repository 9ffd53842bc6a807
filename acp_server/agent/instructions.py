"""Finding and reading a session's project instruction files (`AGENTS.md`, `CLAUDE.md`).

The files are the user's own `AGENTS.md` in the server's config directory, then one file in
each directory from the repository root (the nearest directory at or above the working
directory holding a `.git`) down to the working directory: its `AGENTS.md`, or its
`CLAUDE.md` where it has none. Outside a repository only the working directory's own is read.
The order is farthest first, so that the nearest file comes last and takes precedence
(`core.prompt_render.cap_instructions` orders the cap the same way).

What a repository holds is untrusted: a file is read only when it is a regular file, up to
`MAX_FILE_BYTES`, and a symlink is followed only to a file inside the same root (the
repository, or the config directory), so that an `AGENTS.md` cannot send a file from
elsewhere to the model. Blocking: callers run `read_instructions` in a worker thread.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Final

from ..core.events import InstructionFile
from ..core.prompt_render import InstructionSource
from .confinement import is_inside
from .tools.regular import read_regular

INSTRUCTION_NAMES: Final = ("AGENTS.md", "CLAUDE.md")
"""The names read in each directory, the first one found alone."""
USER_INSTRUCTIONS: Final = "AGENTS.md"
"""The user's own file, in the config directory."""
MAX_FILE_BYTES: Final = 1024 * 1024
"""A larger instruction file is not read (the prompt holds 32 KiB of them in all anyway)."""


class ReadInstructions:
    """The instruction files found for a session: what the prompt holds (`sources`) and what
    the log keeps of them (`files`, which leaves out a file too large to read)."""

    def __init__(self, sources: list[InstructionSource], files: list[InstructionFile]) -> None:
        self.sources = sources
        self.files = files


def repository_root(cwd: Path) -> Path | None:
    """The nearest directory at or above `cwd` holding a `.git` (a directory, or a worktree's
    file), or None."""
    for directory in (cwd, *cwd.parents):
        if os.path.lexists(directory / ".git"):
            return directory
    return None


def instruction_directories(cwd: Path) -> list[Path]:
    """The directories whose instruction files a session in `cwd` reads, farthest first."""
    root = repository_root(cwd)
    if root is None:
        return [cwd]
    below = cwd.relative_to(root).parts
    return [root.joinpath(*below[:depth]) for depth in range(len(below) + 1)]


def read_instructions(cwd: Path, config_dir: Path | None) -> ReadInstructions:
    """The instruction files of a session in `cwd` (the user's in `config_dir` first)."""
    sources: list[InstructionSource] = []
    files: list[InstructionFile] = []
    seen: set[str] = set()
    places: list[tuple[Path, tuple[str, ...], Path]] = []
    if config_dir is not None:
        places.append((config_dir, (USER_INSTRUCTIONS,), config_dir))
    root = repository_root(cwd) or cwd
    places.extend(
        (directory, INSTRUCTION_NAMES, root) for directory in instruction_directories(cwd)
    )
    for directory, names, within in places:
        for name in names:
            path = directory / name
            read = _read(path, within)
            if read is None:
                continue
            real, data = read
            if real in seen:
                break  # the same file by another way (a symlink): read once
            seen.add(real)
            if isinstance(data, int):
                sources.append(InstructionSource(str(path), None, data))
            else:
                sources.append(InstructionSource(str(path), data, len(data)))
                digest = hashlib.sha256(data).hexdigest()
                files.append(InstructionFile(str(path), digest, len(data)))
            break
    return ReadInstructions(sources, files)


def _read(path: Path, within: Path) -> tuple[str, bytes | int] | None:
    """The real path of `path` and its bytes (its size when over `MAX_FILE_BYTES`); None when
    it is missing, not a regular file, or a symlink to outside `within`."""
    if not os.path.lexists(path):
        return None
    real = os.path.realpath(path)
    if not is_inside(Path(real), Path(os.path.realpath(within))):
        return None
    data = read_regular(real, MAX_FILE_BYTES)
    if data is None:
        return None
    return real, data
