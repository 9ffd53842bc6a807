"""The session store keeps its logs' chunk checks beside them (`chunk-checks.jsonl`): a writer
records the long runs it writes, a continuation keeps those runs packed, and a check file that
is missing, stale or damaged only costs the load its speed."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from strategies import streamed_turn

from acp_server.core.chunk_checks import MIN_CHECKED_EVENTS, PackedChunks, decode_checks
from acp_server.core.chunk_rows import pack_chunk_runs
from acp_server.core.header import SESSION_FORMAT_VERSION, SessionHeader
from acp_server.core.projection import project_load
from acp_server.storage.errors import CorruptLog
from acp_server.storage.jsonl.sessions import CHECKS_NAME, SessionStore

SID = "s"
DELTAS = 3 * MIN_CHECKED_EVENTS


TURN_EVENTS = DELTAS + 8
RUN = DELTAS + 2
"""A step's run: its block start, its deltas, its block end."""
EVENTS = streamed_turn(0, 0, DELTAS) + streamed_turn(1, TURN_EVENTS, DELTAS)


def header(root: Path) -> SessionHeader:
    return SessionHeader(version=SESSION_FORMAT_VERSION, id=SID, created_at=0, cwd=str(root))


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path / "sessions")


def write_streamed(store: SessionStore, root: Path) -> Path:
    """Session `SID` holding `EVENTS`, written as the loop writes them: a flush every 10
    chunks, so each step's chunks are many short rows."""
    writer = store.create(header(root))
    for start in range(0, len(EVENTS), 10):
        writer.append(EVENTS[start : start + 10])
        writer.flush()
    writer.close()
    return store.log_path(SID)


def write_elsewhere(store: SessionStore, root: Path) -> Path:
    """Session `SID` holding `EVENTS`, its log written without the store's writer."""
    store.create(header(root)).close()
    path = store.log_path(SID)
    with path.open("ab") as log:
        log.writelines(msgspec.json.encode(r) + b"\n" for r in pack_chunk_runs(EVENTS))
    return path


def packed_runs(store: SessionStore) -> list[tuple[int, int]]:
    """(seq0, count) of each run a continuation of `SID` keeps packed."""
    continued = store.continue_session(SID, 0)
    try:
        return [(r.seq0, r.count) for r in continued.log.records_from(0) if type(r) is PackedChunks]
    finally:
        continued.writer.close()


def test_a_session_its_writer_wrote_loads_each_steps_chunks_as_one_packed_run(
    store: SessionStore, tmp_path: Path
) -> None:
    write_streamed(store, tmp_path)

    assert packed_runs(store) == [(3, RUN), (TURN_EVENTS + 3, RUN)]


def test_a_loaded_session_reads_as_the_events_it_holds(store: SessionStore, tmp_path: Path) -> None:
    write_streamed(store, tmp_path)
    continued = store.continue_session(SID, 0)
    try:
        assert project_load(continued.log.records_from(0)) == project_load(EVENTS)
        assert continued.log.events() == EVENTS
    finally:
        continued.writer.close()


def test_the_first_load_of_a_log_written_elsewhere_keeps_its_checks_for_the_next(
    store: SessionStore, tmp_path: Path
) -> None:
    path = write_elsewhere(store, tmp_path)
    checks = path.parent / CHECKS_NAME
    assert not checks.exists()

    # Its runs are decoded and checked, then kept packed as the next load will take them.
    assert packed_runs(store) == [(3, RUN), (TURN_EVENTS + 3, RUN)]
    assert [(c.seq0, c.count) for c in decode_checks(checks.read_bytes()).values()] == [
        (3, RUN),
        (TURN_EVENTS + 3, RUN),
    ]
    assert packed_runs(store) == [(3, RUN), (TURN_EVENTS + 3, RUN)]


def test_a_damaged_check_file_costs_nothing_but_time_and_is_written_anew(
    store: SessionStore, tmp_path: Path
) -> None:
    path = write_streamed(store, tmp_path)
    checks = path.parent / CHECKS_NAME
    kept = checks.read_bytes()
    checks.write_bytes(b"[7,1,0,0,0,0,0]\n" + kept[: len(kept) // 2])  # stale, then torn

    # The second run's check was torn away: that run is decoded and checked, and its check kept.
    assert packed_runs(store) == [(3, RUN), (TURN_EVENTS + 3, RUN)]
    assert decode_checks(checks.read_bytes()) == decode_checks(kept)
    assert packed_runs(store) == [(3, RUN), (TURN_EVENTS + 3, RUN)]


@pytest.mark.parametrize("turn", [0, 1])
def test_a_row_changed_after_its_check_was_kept_makes_the_session_unloadable_naming_its_line(
    store: SessionStore, tmp_path: Path, turn: int
) -> None:
    path = write_streamed(store, tmp_path)
    lines = path.read_bytes().split(b"\n")
    number = next(
        n
        for n, line in enumerate(lines, 1)
        if b'"text-chunks"' in line and b'"turn":%d,' % turn in line
    )
    lines[number - 1] = lines[number - 1].replace(b'"dt":[', b'"dt":[1,', 1)
    path.write_bytes(b"\n".join(lines))

    with pytest.raises(CorruptLog) as caught:
        store.continue_session(SID, 0)

    assert caught.value.line == number
    assert "dt has" in caught.value.reason


def test_a_closed_writer_leaves_its_session_unlocked_while_its_packed_runs_are_held(
    store: SessionStore, tmp_path: Path
) -> None:
    write_streamed(store, tmp_path)
    first = store.continue_session(SID, 0)
    held = first.log
    first.writer.close()

    second = store.continue_session(SID, 0)  # LogLocked if the first read's map held the lock
    second.writer.close()

    assert any(type(r) is PackedChunks for r in held.records_from(0))
    assert held.events() == EVENTS


def test_appends_after_a_load_extend_the_checks_with_the_new_lines(
    store: SessionStore, tmp_path: Path
) -> None:
    write_streamed(store, tmp_path)
    continued = store.continue_session(SID, 0)
    more = streamed_turn(2, 2 * TURN_EVENTS, DELTAS)
    for start in range(0, len(more), 10):
        continued.writer.append(more[start : start + 10])
        continued.writer.flush()
    continued.writer.close()

    assert packed_runs(store) == [
        (3, RUN),
        (TURN_EVENTS + 3, RUN),
        (2 * TURN_EVENTS + 3, RUN),
    ]
