"""`edit_file`: replace an exact piece of a file's text (`apply_edit` is pure).

The replacement is literal, never a pattern: `oldText` must occur exactly once, or `replaceAll`
must say that every occurrence is meant. Anything else is an error the model can act on, with
the number of matches and their lines. Occurrences are counted as `str.count` counts them (left
to right, not overlapping), which is also what `str.replace` replaces.

The I/O around it is the caller's: the file's text comes from the client's `fs/read_text_file`
or from `prepare_local_edit` (confined, like `write_file`), and goes back the same way.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Final

from msgspec import Meta

from ...core.acp_updates import ToolCallLocation
from ...core.content import DiffContent, TextContent, ToolResultContent
from ..confinement import Directories, SessionRoots, absolute_path, local_roots
from .arguments import Arguments, FilePath
from .base import ToolError
from .files import open_regular, write_all
from .regular import read_capped

KIND: Final = "edit"

_LISTED_LINES: Final = 20
"""An error lists the lines of at most this many matches."""


class EditFileArgs(Arguments):
    path: FilePath
    old_text: Annotated[
        str,
        Meta(
            min_length=1,
            description="The exact text to replace, whitespace and line breaks included; it "
            "must occur once in the file unless replaceAll is set.",
        ),
    ]
    new_text: Annotated[str, Meta(description="The text to put in its place.")]
    replace_all: Annotated[
        bool, Meta(description="Replace every occurrence of oldText (default false).")
    ] = False


DESCRIPTION: Final = (
    "Edit a text file by replacing an exact piece of it: `oldText` (matched literally, "
    "whitespace included) becomes `newText`. `oldText` must occur exactly once, so include "
    "enough surrounding lines to make it unique; set `replaceAll` to replace every occurrence "
    "instead. If it occurs zero or several times nothing is changed and the error says where "
    "it matched. The user is asked for permission first; the result shows the change as a diff."
)


@dataclass(frozen=True)
class Edit:
    """A successful edit: the file's new text, and where the replacements landed in it."""

    text: str
    lines: list[int]
    """The 1-based line, in the new text, where each replacement starts."""

    @property
    def count(self) -> int:
        return len(self.lines)


def match_lines(text: str, needle: str) -> list[int]:
    """The 1-based line where each occurrence of `needle` in `text` starts (as `str.count`)."""
    lines: list[int] = []
    line = 1
    counted_to = 0
    position = text.find(needle)
    while position >= 0:
        line += text.count("\n", counted_to, position)
        counted_to = position
        lines.append(line)
        position = text.find(needle, position + len(needle))
    return lines


def _listed(lines: list[int]) -> str:
    shown = ", ".join(str(line) for line in lines[:_LISTED_LINES])
    more = len(lines) - _LISTED_LINES
    return f"{shown} and {more} more" if more > 0 else shown


def apply_edit(text: str, args: EditFileArgs, shown: str) -> Edit:
    """`text` with the edit applied, or a `ToolError` (naming the file as `shown`)."""
    if args.old_text == args.new_text:
        raise ToolError(f"oldText and newText are the same: nothing to change in {shown}")
    found = match_lines(text, args.old_text)
    if not found:
        raise ToolError(
            f"oldText was not found in {shown}: it must match the file exactly, whitespace "
            "and line breaks included (read the file again to see its current text)"
        )
    if len(found) > 1 and not args.replace_all:
        raise ToolError(
            f"oldText occurs {len(found)} times in {shown} (lines {_listed(found)}): include "
            "more surrounding text to make it unique, or set replaceAll to replace every "
            "occurrence"
        )
    # Each earlier replacement moves the later ones by the difference in line breaks.
    shift = args.new_text.count("\n") - args.old_text.count("\n")
    landed = [line + index * shift for index, line in enumerate(found)]
    return Edit(text.replace(args.old_text, args.new_text), landed)


def edit_summary(shown: str, edit: Edit) -> str:
    if edit.count == 1:
        return f"Edited {shown}: 1 replacement (line {edit.lines[0]})."
    return f"Edited {shown}: {edit.count} replacements (lines {_listed(edit.lines)})."


def edit_content(shown: str, old_text: str, edit: Edit) -> list[ToolResultContent]:
    """The `tool/result` content of an edit: its summary, and the change as a diff."""
    return [
        TextContent(edit_summary(shown, edit)),
        DiffContent(path=shown, new_text=edit.text, old_text=old_text),
    ]


def edit_locations(path: str, edit: Edit) -> list[ToolCallLocation]:
    """Where the edit touched the file, for the tool call's `locations`."""
    return [ToolCallLocation(path, line) for line in edit.lines]


# ---------------------------------------------------------------------------------------------
# On the server's own file system (blocking: worker threads).


def edit_again(current: str, read: str, edit: Edit, args: EditFileArgs, shown: str) -> Edit:
    """The edit to write on the file's `current` text, after the permission question.

    The user was asked about a replacement (`oldText` by `newText`), worked out on the text
    `read` before asking. When the file still holds that text, it is that edit; when the user
    changed it meanwhile, the same replacement is made again on what it holds now, so their
    change is kept and the diff shows it; when it no longer applies, a `ToolError` says so and
    nothing is written.
    """
    if current == read:
        return edit
    try:
        return apply_edit(current, args, shown)
    except ToolError as exc:
        raise ToolError(
            f"{shown} changed since it was read, and the edit no longer applies: {exc}. "
            "Nothing was written."
        ) from None


@dataclass(frozen=True)
class LocalEdit:
    """An edit worked out on a local file but not yet written."""

    target: Path
    """The resolved path that was read: what is written, opened beneath the roots again."""
    shown: Path
    """The path as the model and the user see it (absolute, unresolved)."""
    old_text: str
    edit: Edit
    args: EditFileArgs
    roots: Directories
    """The session's directories, beneath which `target` is opened."""
    cap: int


def _decoded(data: bytes, raw: str) -> str:
    """`data` as UTF-8. Text that is not UTF-8 is refused: written back with U+FFFD in place of
    its undecodable bytes, it would be corrupted."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(
            f"refused: {raw} is not UTF-8 text, which edit_file would corrupt"
        ) from None


def _text_of(fd: int, raw: str, cap: int) -> str:
    """The UTF-8 text of the file open as `fd`, at most `cap` bytes. `OSError` propagates."""
    size = os.fstat(fd).st_size
    if size > cap:
        raise ToolError(f"refused: {raw} is {size} bytes, over the {cap}-byte limit for edits")
    os.lseek(fd, 0, os.SEEK_SET)
    data = read_capped(fd, size, cap)
    if isinstance(data, int):  # it grew since the fstat
        raise ToolError(f"refused: {raw} is {data} bytes, over the {cap}-byte limit for edits")
    return _decoded(data, raw)


def _read_text(roots: SessionRoots, raw: str, cwd: Path, cap: int) -> tuple[str, Path]:
    """The UTF-8 text of the file to edit, and the path it resolved to."""
    try:
        fd, where, _ = open_regular(roots, raw, cwd, os.O_RDONLY)
    except FileNotFoundError:
        raise ToolError(
            f"{raw} does not exist: edit_file changes an existing file (write_file creates one)"
        ) from None
    except OSError as exc:
        raise ToolError(f"cannot read {raw}: {exc.strerror or exc}") from None
    try:
        return _text_of(fd, raw, cap), where
    except OSError as exc:
        raise ToolError(f"cannot read {raw}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def prepare_local_edit(
    args: EditFileArgs,
    cwd: Path,
    additional_directories: Sequence[Path],
    cap: int,
    credentials: Path | None = None,
) -> LocalEdit:
    """Confine, read and edit `args.path` (nothing written), or `PathRefused` / `ToolError`.

    Everything that can refuse the edit happens here, before the user is asked for permission.
    """
    shown = absolute_path(args.path, cwd)
    roots = Directories(cwd, additional_directories, credentials)
    with local_roots(*roots) as opened:
        old_text, target = _read_text(opened, args.path, cwd, cap)
    edit = apply_edit(old_text, args, str(shown))
    return LocalEdit(target, shown, old_text, edit, args, roots, cap)


def write_local_edit(prepared: LocalEdit, raw: str) -> tuple[str, Edit]:
    """Write a prepared edit (after permission), and return the text it replaced and the edit
    written: the file is read again through the descriptor that writes it, and the edit made
    again if the user changed the file since it was prepared (`edit_again`)."""
    shown = str(prepared.shown)
    try:
        with local_roots(*prepared.roots) as roots:
            fd, _, _ = open_regular(roots, str(prepared.target), prepared.roots[0], os.O_RDWR)
        try:
            current = _text_of(fd, raw, prepared.cap)
            edit = edit_again(current, prepared.old_text, prepared.edit, prepared.args, shown)
            write_all(fd, edit.text.encode("utf-8"))
        finally:
            os.close(fd)
    except FileNotFoundError:
        raise ToolError(
            f"{shown} changed since it was read: it no longer exists. Nothing was written."
        ) from None
    except OSError as exc:
        raise ToolError(f"cannot write {raw}: {exc.strerror or exc}") from None
    return current, edit
