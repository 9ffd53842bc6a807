"""`session/list` reads only what it shows: the last title, the last event's time, and whether
the last `session/archived` event archived the session."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server.core.events import (
    AssistantChunk,
    AssistantChunkData,
    SessionArchived,
    SessionArchivedData,
    SessionEvent,
    SessionTitle,
    SessionTitleData,
    TurnStart,
    TurnStartData,
)
from acp_server.core.header import SessionHeader
from acp_server.core.stream import TextDelta
from acp_server.storage.jsonl.lines import Compression
from acp_server.storage.jsonl.sessions import SessionStore
from acp_server.storage.jsonl.store import list_summary, summarize


def write(root: Path, compression: Compression, events: list[SessionEvent]) -> Path:
    store = SessionStore(root, compression=compression)
    writer = store.create(SessionHeader(version=2, id="s", created_at=0, cwd="/"))
    for event in events:  # one flush each: titles and rows in separate batches and frames
        writer.append([event])
        writer.flush()
    writer.close()
    return store.log_path("s")


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_the_latest_title_and_the_last_member_time_of_a_row(
    tmp_path: Path, compression: Compression
) -> None:
    chunks = [
        AssistantChunk(3 + n, 100 + n, AssistantChunkData(0, 0, TextDelta(0, "x")))
        for n in range(4)
    ]
    store = SessionStore(tmp_path, compression=compression)
    writer = store.create(SessionHeader(version=2, id="s", created_at=0, cwd="/"))
    writer.append(
        [
            TurnStart(0, 5, TurnStartData(0)),
            SessionTitle(1, 6, SessionTitleData("first")),
            SessionTitle(2, 7, SessionTitleData("second")),
        ]
    )
    writer.flush()
    writer.append(chunks)  # one packed row
    writer.close()
    assert list_summary(store.log_path("s")) == ("second", 103)


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_a_log_with_only_its_header_has_no_title_and_no_events(
    tmp_path: Path, compression: Compression
) -> None:
    assert list_summary(write(tmp_path, compression, [])) == (None, None)


def test_a_torn_final_line_is_not_the_last_event(tmp_path: Path) -> None:
    path = write(tmp_path, "none", [TurnStart(0, 5, TurnStartData(0))])
    with open(path, "ab") as file:
        file.write(b'{"type":"session/title","seq":1,"time":9,"data":{"title":"to')
    assert list_summary(path) == (None, 5)


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_the_last_archive_event_says_whether_the_session_is_archived(
    tmp_path: Path, compression: Compression
) -> None:
    events: list[SessionEvent] = [
        SessionArchived(0, 5, SessionArchivedData(True)),
        SessionArchived(1, 6, SessionArchivedData(False)),
        SessionArchived(2, 7, SessionArchivedData(True)),
        TurnStart(3, 8, TurnStartData(0)),
    ]
    assert summarize(write(tmp_path / "a", compression, events)) == (None, 8, True)
    assert summarize(write(tmp_path / "b", compression, events[:2])) == (None, 6, False)
    assert summarize(write(tmp_path / "c", compression, [])) == (None, None, False)
