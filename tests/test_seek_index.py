"""The JSONL history index starts a page far back from the seek point nearest it.

A log's writer keeps `seek-points.jsonl` beside it; a fresh index (a fresh process) reads a page
in the middle of a big log from the point nearest after the page, not by walking back from the
end. A missing, torn, stale or lying seek file gives the same pages as none (the walk), and the
walk writes the points anew. Measured by the bytes of lines the index decodes.
"""

from __future__ import annotations

import io
import itertools
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest.mock import patch

import msgspec
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import batch_cuts, session_events, split
from test_history_server import realistic

from acp_server.cli.log import run_log_command
from acp_server.core.chunk_rows import StorageRecord
from acp_server.core.content import TextContent
from acp_server.core.events import (
    AssistantChunk,
    AssistantChunkData,
    AssistantMessage,
    AssistantMessageData,
    AssistantMessageEvent,
    SessionEvent,
    StepData,
    StepEnd,
    StepStart,
    ToolCall,
    ToolCallData,
    ToolResult,
    ToolResultData,
    TurnEnd,
    TurnEndData,
    TurnEndReasonCompleted,
    TurnStart,
    TurnStartData,
    UserMessage,
    UserMessageData,
    UserMessageEvent,
)
from acp_server.core.header import SESSION_FORMAT_VERSION, SessionHeader
from acp_server.core.paging import PageCut
from acp_server.core.seek_points import SEEK_SPACING, SeekPoint, decode_points, encode_points
from acp_server.core.stream import AssistantText, BlockEnd, BlockStart, Finish, TextDelta
from acp_server.storage.jsonl import index as index_module
from acp_server.storage.jsonl import writer as writer_module
from acp_server.storage.jsonl.index import LogIndex
from acp_server.storage.jsonl.lines import SEEK_NAME, Compression, zstd_frame_end
from acp_server.storage.jsonl.log import read_log
from acp_server.storage.jsonl.sessions import SessionStore

T0 = 1_760_000_000_000
TURNS = 60
OUTPUT = 96 * 1024
"""Bytes of each tool output: the log comes to about 5.6 MiB, some 22 seek spacings."""
COMPRESSIONS = ["none", "zstd"]


def header(session_id: str) -> SessionHeader:
    return SessionHeader(version=SESSION_FORMAT_VERSION, id=session_id, created_at=T0, cwd="/w")


def turn_batches(turns: int, output: int) -> list[list[SessionEvent]]:
    """Turns as the loop flushes them (a batch per step): a user message, a streamed answer
    with a tool call whose output is `output` bytes of text, a closing answer."""
    batches: list[list[SessionEvent]] = []
    seq = 0

    def event(kind: type, data: Any, **envelope: Any) -> SessionEvent:
        nonlocal seq
        made: SessionEvent = kind(seq, T0 + seq, data, **envelope)
        seq += 1
        return made

    for turn in range(turns):
        text = (f"turn {turn} line of output\n" * (output // 20))[:output]
        batch = [
            event(TurnStart, TurnStartData(turn)),
            event(
                UserMessageEvent,
                UserMessageData(turn, UserMessage(f"u{turn}", [TextContent(f"ask {turn}")])),
            ),
            event(StepStart, StepData(turn, 0)),
        ]
        first = seq
        batch.append(event(AssistantChunk, AssistantChunkData(turn, 0, BlockStart(0, "text"))))
        words = [f"w{k} " for k in range(30)]
        batch += [
            event(AssistantChunk, AssistantChunkData(turn, 0, TextDelta(0, w))) for w in words
        ]
        batch.append(event(AssistantChunk, AssistantChunkData(turn, 0, BlockEnd(0))))
        last = seq
        batch.append(event(AssistantChunk, AssistantChunkData(turn, 0, Finish("tool-calls"))))
        message = AssistantMessage(f"a{turn}", [AssistantText("".join(words))])
        batch += [
            event(
                AssistantMessageEvent,
                AssistantMessageData(turn, 0, message),
                source_range=(first, last),
            ),
            event(ToolCall, ToolCallData(turn, 0, f"call_{turn}", "run", "{}")),
            event(ToolResult, ToolResultData(turn, 0, f"call_{turn}", [TextContent(text)])),
            event(StepEnd, StepData(turn, 0)),
        ]
        batches.append(batch)
        batches.append(
            [
                event(StepStart, StepData(turn, 1)),
                event(
                    AssistantMessageEvent,
                    AssistantMessageData(turn, 1, AssistantMessage(f"b{turn}", [])),
                ),
                event(StepEnd, StepData(turn, 1)),
                event(TurnEnd, TurnEndData(turn, TurnEndReasonCompleted())),
            ]
        )
    return batches


def write_log(root: Path, batches: list[list[SessionEvent]], compression: Compression) -> Path:
    store = SessionStore(root, compression=compression)
    writer = store.create(header("big"))
    for batch in batches:
        writer.append(batch)
        writer.flush()
    writer.close()
    return store.log_path("big")


@pytest.fixture(scope="module", params=COMPRESSIONS)
def big(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A big log and its seek file, as its writer left them (tests copy it before changing it)."""
    root = tmp_path_factory.mktemp(f"big-{request.param}")
    return write_log(root, turn_batches(TURNS, OUTPUT), request.param)


@pytest.fixture
def log(big: Path, tmp_path: Path) -> Path:
    """A copy of the big log and its seek file, to change."""
    directory = tmp_path / "big"
    directory.mkdir()
    for name in os.listdir(big.parent):
        (directory / name).write_bytes((big.parent / name).read_bytes())
    return directory / big.name


class Decoded:
    """Counts the bytes of lines the index decodes."""

    def __init__(self) -> None:
        self.bytes = 0

    def __enter__(self) -> Decoded:
        real = index_module.digest_lines

        def counted(path: Path, data: bytes, where: Any) -> Any:
            self.bytes += len(data)
            return real(path, data, where)

        self._patch = patch.object(index_module, "digest_lines", counted)
        self._patch.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._patch.stop()


def encoded(page: tuple[PageCut, list[StorageRecord]]) -> tuple[PageCut, bytes]:
    return page[0], msgspec.json.encode(page[1])


def walked_page(path: Path, end: int, messages: int) -> tuple[PageCut, bytes]:
    """The page as the index reads it without any seek point (walking back from the end)."""
    with tempfile.TemporaryDirectory() as tmp:
        alone = Path(tmp) / path.name
        alone.write_bytes(path.read_bytes())
        return encoded(LogIndex.build(alone).page(end, messages))


def seek_points(path: Path) -> list[SeekPoint]:
    return decode_points((path.parent / SEEK_NAME).read_bytes())


def text_offsets(path: Path) -> dict[int, int]:
    """Where in the log's text each frame begins, by its byte offset (a plain log's text is the
    file: every offset), and at -1 the length of the text."""
    data = path.read_bytes()
    if not path.name.endswith(".zst"):
        return {**{k: k for k in range(len(data))}, -1: len(data)}
    view, text, offset, starts = memoryview(data), 0, 0, {}
    while offset < len(data):
        end = zstd_frame_end(view, offset)
        assert end is not None
        starts[offset] = text
        text += len(zstandard.ZstdDecompressor().decompressobj().decompress(data[offset:end]))
        offset = end
    return {**starts, -1: text}


def first_seq_at(path: Path, offset: int) -> int:
    """The first seq of the record whose line (or frame) begins at byte `offset`."""
    data = path.read_bytes()
    if path.name.endswith(".zst"):
        text = zstandard.ZstdDecompressor().decompressobj().decompress(data[offset:])
        line = text.split(b"\n", 1)[0]
    else:
        assert data[offset - 1 : offset] == b"\n"
        line = data[offset:].split(b"\n", 1)[0]
    record = msgspec.json.decode(line)
    return int(record["seq0"] if "seq0" in record else record["seq"])


# ---------------------------------------------------------------------------------------------
# The writer keeps the points.


def test_the_writer_keeps_a_point_at_a_record_start_every_seek_spacing(big: Path) -> None:
    points = seek_points(big)
    text = text_offsets(big)
    assert len(points) >= text[-1] // (2 * SEEK_SPACING)
    assert len(points) <= text[-1] // SEEK_SPACING + 1
    assert all(
        text[b.offset] - text[a.offset] >= SEEK_SPACING for a, b in itertools.pairwise(points)
    )
    for point in points:
        assert first_seq_at(big, point.offset) == point.seq


def test_a_continued_log_keeps_points_for_what_it_appends(tmp_path: Path) -> None:
    batches = turn_batches(12, OUTPUT)
    path = write_log(tmp_path, batches[:12], "none")
    (path.parent / SEEK_NAME).unlink()
    continued_at = path.stat().st_size
    store = SessionStore(tmp_path)
    continued = store.continue_session("big", T0)
    for batch in batches[12:]:
        continued.writer.append(batch)
        continued.writer.flush()
    continued.writer.close()
    points = seek_points(path)
    # The first batch it writes gets a point, then one per spacing of lines.
    assert points[0] == SeekPoint(batches[12][0].seq, continued_at)
    ends = [*(p.offset for p in points), path.stat().st_size]
    # A batch here is at most an output and its envelope: a point follows a spacing within one.
    assert all(
        SEEK_SPACING <= b - a < SEEK_SPACING + OUTPUT + 4096
        for a, b in itertools.pairwise(ends[:-1])
    )
    assert ends[-1] - ends[-2] < SEEK_SPACING + OUTPUT + 4096
    assert len(points) >= 2
    for point in points:
        assert first_seq_at(path, point.offset) == point.seq


def test_a_copy_written_as_one_batch_gets_points_throughout(big: Path, tmp_path: Path) -> None:
    store = SessionStore(tmp_path, compression="none")
    writer = store.create(header("big"))
    writer.write_records(read_log(big).records)
    writer.close()
    copy = store.log_path("big")
    points = seek_points(copy)
    ends = [*(p.offset for p in points), copy.stat().st_size]
    assert all(
        SEEK_SPACING <= b - a < SEEK_SPACING + OUTPUT + 4096
        for a, b in itertools.pairwise(ends[:-1])
    )
    for point in points:
        assert first_seq_at(copy, point.offset) == point.seq


# ---------------------------------------------------------------------------------------------
# A page in the middle reads about what it shows.


@pytest.mark.parametrize("messages", [1, 4, 9])
def test_a_page_in_the_middle_of_a_fresh_index_starts_from_the_nearest_point(
    big: Path, messages: int
) -> None:
    index = LogIndex.build(big)
    end = index.length // 2
    with Decoded() as seeking:
        page = encoded(index.page(end, messages))
    with Decoded() as walking:
        walked = walked_page(big, end, messages)
    assert page == walked
    assert walking.bytes > big.stat().st_size // 3
    # The point is within a spacing after the page: what is read is that and the page itself.
    assert seeking.bytes < 2 * SEEK_SPACING + messages * OUTPUT
    assert seeking.bytes * 4 < walking.bytes


def test_every_page_walked_back_from_the_middle_is_the_walks_page(big: Path) -> None:
    index = LogIndex.build(big)
    end = index.length // 2
    while end > 0:
        page = encoded(index.page(end, 3))
        assert page == walked_page(big, end, 3)
        end = page[0].start


def test_records_in_the_middle_are_read_from_the_nearest_point(big: Path) -> None:
    index = LogIndex.build(big)
    lo, hi = index.length // 2 - 40, index.length // 2
    with Decoded() as seeking:
        records = msgspec.json.encode(index.records_between(lo, hi))
    with tempfile.TemporaryDirectory() as tmp:
        alone = Path(tmp) / big.name
        alone.write_bytes(big.read_bytes())
        assert records == msgspec.json.encode(LogIndex.build(alone).records_between(lo, hi))
    assert seeking.bytes < 2 * SEEK_SPACING + 2 * OUTPUT


# ---------------------------------------------------------------------------------------------
# A seek file that is missing, torn, stale or wrong: the same pages, then repaired.


def damages(path: Path) -> Iterator[tuple[str, bytes]]:
    points = seek_points(path)
    shifted = [SeekPoint(p.seq, p.offset + 1) for p in points]
    off_by_one = [SeekPoint(p.seq + 1, p.offset) for p in points]
    earlier = [SeekPoint(p.seq - 3, p.offset) for p in points[1:]]
    swapped = [SeekPoint(b.seq, a.offset) for a, b in itertools.pairwise(points)]
    yield "garbage", os.urandom(5000)
    yield "torn", encode_points(points)[:-7]
    yield "shifted", encode_points(shifted)
    yield "seq after", encode_points(off_by_one)
    yield "seq before", encode_points(earlier)
    yield "swapped", encode_points(swapped)
    yield "past the end", encode_points([SeekPoint(p.seq, p.offset + 10**9) for p in points])


@pytest.mark.parametrize(
    "damage",
    [
        "missing",
        "empty",
        "garbage",
        "torn",
        "shifted",
        "seq after",
        "seq before",
        "swapped",
        "past the end",
    ],
)
def test_a_damaged_seek_file_gives_the_same_pages_and_is_written_anew(
    log: Path, damage: str
) -> None:
    seek = log.parent / SEEK_NAME
    if damage == "missing":
        seek.unlink()
    elif damage == "empty":
        seek.write_bytes(b"")
    else:
        seek.write_bytes(dict(damages(log))[damage])
    index = LogIndex.build(log)
    end = index.length // 2
    for messages in (1, 4):
        assert encoded(index.page(end, messages)) == walked_page(log, end, messages)
    # The walk wrote the points of what it read anew (each one true): a fresh index uses them.
    repaired = seek_points(log)
    assert len(repaired) >= text_offsets(log)[-1] // 2 // (2 * SEEK_SPACING)
    for point in repaired:
        assert first_seq_at(log, point.offset) == point.seq
    fresh = LogIndex.build(log)
    target = fresh.length // 2 + 3
    walked = walked_page(log, target, 4)
    with Decoded() as seeking:
        assert encoded(fresh.page(target, 4)) == walked
    assert seeking.bytes < 2 * SEEK_SPACING + 4 * OUTPUT


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_the_seek_file_of_a_replaced_log_gives_the_same_pages(
    tmp_path: Path, compression: Compression
) -> None:
    old = write_log(tmp_path / "old", turn_batches(30, OUTPUT), compression)
    path = write_log(tmp_path / "new", turn_batches(45, OUTPUT // 3), compression)
    (path.parent / SEEK_NAME).write_bytes((old.parent / SEEK_NAME).read_bytes())
    index = LogIndex.build(path)
    for end in (index.length // 3, index.length // 2, index.length - 5):
        assert encoded(index.page(end, 2)) == walked_page(path, end, 2)


def test_a_deleted_session_leaves_no_seek_file(tmp_path: Path) -> None:
    path = write_log(tmp_path, turn_batches(8, OUTPUT), "none")
    assert (path.parent / SEEK_NAME).is_file()
    store = SessionStore(tmp_path)
    assert store.session_ids() == ["big"]
    store.delete("big")
    assert not path.parent.exists()
    assert store.session_ids() == []


def test_log_verify_passes_a_log_with_its_seek_file(big: Path) -> None:
    assert (big.parent / SEEK_NAME).is_file()
    assert run_log_command("verify", big, io.StringIO()) == 0


# ---------------------------------------------------------------------------------------------
# Any session, any point spacing: pages from points are the walk's pages.


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_pages_of_any_log_from_its_points_are_the_walks_pages(data: st.DataObject) -> None:
    events = realistic(data.draw(session_events()))
    batches = split(events, data.draw(batch_cuts(len(events))))
    compression = data.draw(st.sampled_from(COMPRESSIONS))
    spacing = data.draw(st.integers(1, 3000))
    messages = data.draw(st.integers(1, 4))
    with (
        tempfile.TemporaryDirectory() as tmp,
        patch.object(writer_module, "SEEK_SPACING", spacing),
    ):
        store = SessionStore(tmp, compression=compression)
        writer = store.create(header("prop"))
        for batch in batches:
            writer.append(batch)
            writer.flush()
        writer.close()
        path = store.log_path("prop")
        ends = data.draw(st.lists(st.integers(0, len(events)), min_size=1, max_size=5))
        index = LogIndex.build(path)
        for end in ends:
            assert encoded(index.page(end, messages)) == walked_page(path, end, messages)
