"""From file bytes to the text a model reads: byte caps, line ranges, UTF-8 (no file system).

`read_excerpt` works on any binary file object (a real file or `io.BytesIO`), reading no more
than it needs: the cap bounds memory even for a huge file or a file that is one endless line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import BinaryIO, Final

_CHUNK: Final = 64 << 10

LOSSY_NOTE: Final = "[the file is not valid UTF-8: undecodable bytes are shown as U+FFFD]"


def complete_utf8_prefix(data: bytes) -> bytes:
    """`data` without a trailing UTF-8 sequence that a cap cut in the middle."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:  # a continuation byte: keep looking for its lead byte
            continue
        needed = (
            2
            if byte >> 5 == 0b110
            else 3
            if byte >> 4 == 0b1110
            else 4
            if byte >> 3 == 0b11110
            else 1
        )
        return data[:-back] if needed > back else data
    return data


def complete_utf8_suffix(data: bytes) -> bytes:
    """`data` without leading continuation bytes (a tail cut in the middle of a character)."""
    start = 0
    while start < min(3, len(data)) and data[start] & 0xC0 == 0x80:
        start += 1
    return data[start:]


def decode_utf8(data: bytes) -> tuple[str, bool]:
    """The text of `data` and whether some bytes were not UTF-8 (and became U+FFFD)."""
    try:
        return data.decode("utf-8"), False
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace"), True


def join_notes(text: str, notes: list[str]) -> str:
    """`text` followed by the notes, a blank line apart, so a note never reads as content."""
    if not notes:
        return text
    body = text if not text or text.endswith("\n") else text + "\n"
    return body + ("\n" if body else "") + "\n".join(notes)


@dataclass(frozen=True)
class Excerpt:
    data: bytes
    """The selected bytes, at most the cap (possibly ending inside a character)."""
    truncated: bool
    """The selection went on past the cap."""
    lines_skipped: int
    """How many lines were passed over to reach `line` (fewer when the file ended first)."""


def _skip_line(stream: BinaryIO) -> bool:
    """Pass over one line, in bounded pieces; False at the end of the file."""
    consumed = False
    while piece := stream.readline(_CHUNK):
        consumed = True
        if piece.endswith(b"\n"):
            break
    return consumed


def read_excerpt(stream: BinaryIO, *, line: int | None, limit: int | None, cap: int) -> Excerpt:
    """The bytes of lines `line`.. (`limit` of them) of `stream`, or all of it, up to `cap`."""
    if line is None and limit is None:
        data = stream.read(cap + 1)
        return Excerpt(data[:cap], len(data) > cap, 0)
    skipped = 0
    while skipped < (line or 1) - 1 and _skip_line(stream):
        skipped += 1
    selected = bytearray()
    taken = 0
    while limit is None or taken < limit:
        piece = stream.readline(cap + 1 - len(selected))
        if not piece:
            break
        selected += piece
        if len(selected) > cap:
            return Excerpt(bytes(selected[:cap]), True, skipped)
        if piece.endswith(b"\n"):
            taken += 1
    return Excerpt(bytes(selected), False, skipped)


def render_excerpt(excerpt: Excerpt, *, size: int, line: int | None, whole_file: bool) -> str:
    """The text the model reads for `excerpt` of a `size`-byte file, with notes about what it
    does not show."""
    data = complete_utf8_prefix(excerpt.data) if excerpt.truncated else excerpt.data
    text, lossy = decode_utf8(data)
    notes: list[str] = []
    if excerpt.truncated and whole_file:
        notes.append(f"[truncated: file is {size} bytes, showing the first {len(data)}]")
    elif excerpt.truncated:
        notes.append(
            f"[truncated: the selected lines are over {len(excerpt.data)} bytes, "
            f"showing the first {len(data)}]"
        )
    if not data and not excerpt.truncated:
        if size == 0:
            notes.append("[the file is empty]")
        elif (line or 1) > 1:
            notes.append(
                f"[line {line} is past the end of the file, which has "
                f"{excerpt.lines_skipped} line{'' if excerpt.lines_skipped == 1 else 's'}]"
            )
    if lossy:
        notes.append(LOSSY_NOTE)
    return join_notes(text, notes)
