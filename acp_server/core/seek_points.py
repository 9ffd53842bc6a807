"""Seek points: where in a session log a record begins, so a reader can start in the middle.

A JSONL log's history index is built from the end of the file backwards, which makes a page in
the middle of a huge log cost reading half of it. Beside the log its writer keeps a few
`SeekPoint`s, one per `SEEK_SPACING` bytes of lines or so: the first seq of a record and the byte offset
where its line (a plain log) or its frame (a Zstandard log) begins. A reader that wants the
records before seq `end` starts from the nearest point at or after `end` and steps back from
there, reading only what the page needs.

A point is only a hint. The file beside the log is neither fsynced nor rewritten when the log is
(a truncation after a failed write, a replaced file), so a point may be torn, stale or simply
wrong; a reader checks the one it uses against the log before trusting it and otherwise walks
back from the end as it would without any. These are the pure parts: the file's bytes, choosing
a point, and picking the sparse points of an index that was walked anyway (the repair).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from typing import Final

import msgspec

SEEK_SPACING: Final = 256 * 1024
"""Bytes of lines between consecutive points (at least: a point is only ever at a batch start;
counted before compression, what a reader decodes)."""


class SeekPoint(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """A record's first seq and the byte offset of its line or frame (a JSON array, in order)."""

    seq: int
    offset: int


_encoder: Final = msgspec.json.Encoder()
_decoder: Final = msgspec.json.Decoder(SeekPoint)


def encode_points(points: Iterable[SeekPoint]) -> bytes:
    """Points as JSON lines, each ending in a newline."""
    return b"".join([_encoder.encode(point) + b"\n" for point in points])


def decode_points(data: bytes) -> list[SeekPoint]:
    """The usable points of a seek file's bytes, in seq order.

    A line that is not a point (torn, changed) is left out, and so is every point that does not
    go forwards in both seq and offset from the ones kept before it: a log cut back and written
    again leaves its old points behind, and the newer ones after them are kept instead.
    """
    points: list[SeekPoint] = []
    decode = _decoder.decode
    for raw in data.split(b"\n"):
        if not raw:
            continue
        try:
            point = decode(raw)
        except msgspec.DecodeError:
            continue
        if point.seq < 0 or point.offset < 0:
            continue
        # A point that goes back replaces the ones it does not follow: they were written for a
        # part of the log since cut off (the newer writes describe the file as it is now).
        while points and (points[-1].seq >= point.seq or points[-1].offset >= point.offset):
            points.pop()
        points.append(point)
    return points


def choose_point(points: Sequence[SeekPoint], end: int, before: int) -> SeekPoint | None:
    """The point to start a read of the records before seq `end` from: the one with the least
    seq at or after `end` whose offset is before `before` (where what is already indexed, or
    the file's complete part, begins); None when no point helps.

    `points` are in seq order with offsets increasing (`decode_points` makes them so).
    """
    k = bisect_left(points, end, key=_seq)
    if k < len(points) and points[k].offset < before:
        return points[k]
    return None


def sparse_points(
    records: Iterable[tuple[int, int | None, int]], spacing: int = SEEK_SPACING
) -> list[SeekPoint]:
    """Points for records given as (first seq, offset, bytes of its line), in log order: the
    first record, then the first after each `spacing` bytes of lines since the last point. A
    record whose offset is None cannot be started from (a line inside a Zstandard frame)."""
    points: list[SeekPoint] = []
    since = spacing
    for seq, offset, size in records:
        if offset is not None and since >= spacing:
            points.append(SeekPoint(seq, offset))
            since = 0
        since += size
    return points


def batch_points(
    starts: Sequence[int],
    sizes: Sequence[int],
    offset: int,
    since: int,
    *,
    any_line: bool,
    spacing: int = SEEK_SPACING,
) -> tuple[list[SeekPoint], int]:
    """The points a writer keeps for a batch of lines written at byte `offset` (the lines'
    records' first seqs and their sizes with newlines), `since` bytes of lines after the last
    point; and how many bytes of lines follow the last point after the batch. With `any_line`
    (a plain log) a point may be at any line of the batch, else only at its first (a
    Zstandard log, where only a frame can be started from)."""
    points: list[SeekPoint] = []
    for k, (seq, size) in enumerate(zip(starts, sizes, strict=True)):
        if since >= spacing and (any_line or k == 0):
            points.append(SeekPoint(seq, offset))
            since = 0
        since += size
        offset += size
    return points, since


def merge_points(kept: Sequence[SeekPoint], walked: Sequence[SeekPoint]) -> list[SeekPoint]:
    """The points of a seek file repaired from `walked`, points of a part of the log that was
    read and checked: the old points before that part are kept (still hints), the ones within
    it replaced."""
    if not walked:
        return list(kept)
    first = walked[0]
    return [p for p in kept if p.seq < first.seq and p.offset < first.offset] + list(walked)


def points_missing(
    points: Sequence[SeekPoint], lo: int, hi: int, text: int, spacing: int = SEEK_SPACING
) -> bool:
    """Whether the points with offsets in `[lo, hi)`, where the log holds `text` bytes of
    lines, are fewer than half of those a writer would have kept there (the file was lost, or
    written only for part of the log)."""
    count = bisect_left(points, hi, key=_offset) - bisect_left(points, lo, key=_offset)
    return 2 * count < text // spacing


def _seq(point: SeekPoint) -> int:
    return point.seq


def _offset(point: SeekPoint) -> int:
    return point.offset
