"""Seek points, the pure part: the file's lines, choosing a point, the points a walk repairs."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from acp_server.core.seek_points import (
    SeekPoint,
    batch_points,
    choose_point,
    decode_points,
    encode_points,
    merge_points,
    points_missing,
    sparse_points,
)


@st.composite
def increasing_points(draw: st.DrawFn) -> list[SeekPoint]:
    """Points as a writer keeps them: seqs and offsets both strictly increasing."""
    steps = draw(st.lists(st.tuples(st.integers(1, 50), st.integers(1, 5000)), max_size=30))
    seq, offset = draw(st.integers(0, 10)), draw(st.integers(1, 100))
    points = []
    for seq_step, offset_step in steps:
        points.append(SeekPoint(seq, offset))
        seq, offset = seq + seq_step, offset + offset_step
    return points


def increasing(points: list[SeekPoint]) -> bool:
    return all(a.seq < b.seq and a.offset < b.offset for a, b in itertools.pairwise(points))


@given(increasing_points())
def test_points_read_back_as_written(points: list[SeekPoint]) -> None:
    assert decode_points(encode_points(points)) == points


@given(st.binary(max_size=300), increasing_points())
def test_any_bytes_decode_to_increasing_points_without_raising(
    garbage: bytes, points: list[SeekPoint]
) -> None:
    decoded = decode_points(encode_points(points) + garbage)
    assert increasing(decoded)
    assert all(point.seq >= 0 and point.offset >= 0 for point in decoded)


@given(increasing_points(), st.integers(0, 1000))
def test_a_torn_last_line_loses_only_that_point(points: list[SeekPoint], cut: int) -> None:
    data = encode_points(points)
    last = encode_points(points[-1:])
    torn = data[: len(data) - 2 - cut % (len(last) - 1)] if points else data
    assert decode_points(torn) == points[:-1]


def test_points_of_a_log_cut_back_and_written_again_give_way_to_the_newer_ones() -> None:
    old = [SeekPoint(0, 10), SeekPoint(50, 3000), SeekPoint(90, 6000)]
    new = [SeekPoint(60, 4000), SeekPoint(80, 9000)]
    assert decode_points(encode_points(old + new)) == [
        SeekPoint(0, 10),
        SeekPoint(50, 3000),
        SeekPoint(60, 4000),
        SeekPoint(80, 9000),
    ]


def test_lines_that_are_not_points_are_left_out() -> None:
    data = b'[1,2]\n{"seq":3}\n[4]\n[-1,7]\n[5,"x"]\nnot json\n[6,70]\n'
    assert decode_points(data) == [SeekPoint(1, 2), SeekPoint(6, 70)]


@given(increasing_points(), st.integers(0, 2000), st.integers(0, 200_000))
def test_the_point_chosen_is_the_nearest_at_or_after_the_end_before_the_limit(
    points: list[SeekPoint], end: int, before: int
) -> None:
    usable = [p for p in points if p.seq >= end and p.offset < before]
    assert choose_point(points, end, before) == (
        min(usable, key=lambda p: p.seq) if usable else None
    )


def test_a_point_at_exactly_the_end_is_chosen() -> None:
    points = [SeekPoint(10, 100), SeekPoint(20, 200), SeekPoint(30, 300)]
    assert choose_point(points, 20, 1000) == SeekPoint(20, 200)
    assert choose_point(points, 21, 1000) == SeekPoint(30, 300)
    assert choose_point(points, 21, 300) is None
    assert choose_point(points, 31, 1000) is None


@given(
    st.lists(
        st.tuples(st.integers(1, 9), st.integers(1, 700), st.booleans()), min_size=1, max_size=60
    ),
    st.integers(1, 2000),
)
def test_sparse_points_start_at_the_first_seekable_record_and_leave_no_gap_of_a_spacing(
    drawn: list[tuple[int, int, bool]], spacing: int
) -> None:
    records: list[tuple[int, int | None, int]] = []
    seq, offset = 0, 5
    for seq_step, size, seekable in drawn:
        records.append((seq, offset if seekable else None, size))
        seq, offset = seq + seq_step, offset + size
    points = sparse_points(records, spacing)
    seekable = [SeekPoint(seq, offset) for seq, offset, _ in records if offset is not None]
    assert points[:1] == seekable[:1]
    assert set(points) <= set(seekable)
    assert all(b.offset - a.offset >= spacing for a, b in itertools.pairwise(points))
    # No seekable record is a spacing or more past the point before it without being one.
    for point in seekable:
        before = max(p.offset for p in points if p.offset <= point.offset)
        assert point.offset - before < spacing or point in points


def test_sparse_points_example() -> None:
    records = [(0, 10, 50), (3, 60, 50), (7, 110, 10), (9, None, 280), (12, 400, 5)]
    assert sparse_points(records, spacing=100) == [
        SeekPoint(0, 10),
        SeekPoint(7, 110),
        SeekPoint(12, 400),
    ]
    assert sparse_points([(0, None, 500), (4, 500, 1)], spacing=100) == [SeekPoint(4, 500)]


@given(
    st.lists(st.integers(1, 900), min_size=1, max_size=40),
    st.integers(0, 40),
    st.integers(0, 3000),
    st.integers(1, 2000),
)
def test_a_plain_batch_gets_the_same_points_however_it_is_split(
    sizes: list[int], cut: int, since: int, spacing: int
) -> None:
    starts = [3 * k + 7 for k in range(len(sizes))]
    cut = min(cut, len(sizes))
    whole, after = batch_points(starts, sizes, 100, since, any_line=True, spacing=spacing)
    first, middle = batch_points(
        starts[:cut], sizes[:cut], 100, since, any_line=True, spacing=spacing
    )
    second, end = batch_points(
        starts[cut:], sizes[cut:], 100 + sum(sizes[:cut]), middle, any_line=True, spacing=spacing
    )
    assert (first + second, end) == (whole, after)
    line_starts = dict(zip(starts, [100 + sum(sizes[:k]) for k in range(len(sizes))], strict=True))
    assert all(line_starts[point.seq] == point.offset for point in whole)
    assert all(b.offset - a.offset >= spacing for a, b in itertools.pairwise(whole))


def test_batch_points_example() -> None:
    sizes = [50, 120, 10, 40, 300]
    assert batch_points([0, 1, 5, 6, 9], sizes, 1000, 100, any_line=True, spacing=100) == (
        [SeekPoint(0, 1000), SeekPoint(5, 1170)],
        350,
    )
    # A Zstandard batch: only its first line (its frame) may be started from.
    assert batch_points([0, 1, 5, 6, 9], sizes, 1000, 100, any_line=False, spacing=100) == (
        [SeekPoint(0, 1000)],
        520,
    )
    assert batch_points([0, 1], [50, 50], 1000, 99, any_line=False, spacing=100) == ([], 199)


@given(increasing_points(), increasing_points())
def test_a_repair_keeps_the_old_points_before_the_walk_and_the_walks_points(
    kept: list[SeekPoint], walked: list[SeekPoint]
) -> None:
    merged = merge_points(kept, walked)
    assert increasing(merged)
    assert merged[len(merged) - len(walked) :] == walked
    assert set(merged) <= set(kept) | set(walked)


def test_a_repair_replaces_the_points_within_the_walk() -> None:
    kept = [SeekPoint(0, 10), SeekPoint(40, 400), SeekPoint(77, 999)]
    walked = [SeekPoint(30, 300), SeekPoint(60, 700)]
    assert merge_points(kept, walked) == [SeekPoint(0, 10), *walked]
    assert merge_points(kept, []) == kept


def test_points_are_missing_when_fewer_than_half_a_writer_keeps() -> None:
    points = [SeekPoint(k, 100 * k) for k in range(10)]  # one per 100 bytes
    assert not points_missing(points, 0, 1000, 1000, spacing=100)
    assert not points_missing(points, 500, 1000, 500, spacing=100)
    assert not points_missing(points[::2], 0, 1000, 1000, spacing=100)
    assert points_missing(points[::3], 0, 1000, 1000, spacing=100)
    # Compressed: 1000 bytes of file holding 4000 of lines.
    assert points_missing(points[::2], 0, 1000, 4000, spacing=100)
    assert points_missing([], 0, 200, 200, spacing=100)
    assert points_missing([], 0, 199, 199, spacing=100)
    assert not points_missing([], 0, 99, 99, spacing=100)
