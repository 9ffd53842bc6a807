"""`Store.open_tail` (SPEC 4.2's `replay.maxMessages`), one suite over every engine: a session
opened for a tail holds the same suffix a whole open holds, from its base (`core.tail`), and
of what comes before only the settings and the count of model calls."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from acp_server.core.content import TextContent
from acp_server.core.events import (
    AssistantChunk,
    AssistantChunkData,
    AssistantMessage,
    AssistantMessageData,
    AssistantMessageEvent,
    CommandResult,
    CommandResultData,
    ContextCompaction,
    ContextCompactionData,
    SessionConfig,
    SessionConfigData,
    SessionEvent,
    SessionMode,
    SessionModeData,
    SessionRewind,
    SessionRewindData,
    SessionTitle,
    SessionTitleData,
    StepData,
    StepEnd,
    StepStart,
    TurnEnd,
    TurnEndData,
    TurnEndReasonCompleted,
    TurnEndReasonInterrupted,
    TurnStart,
    TurnStartData,
    UserMessage,
    UserMessageData,
    UserMessageEvent,
)
from acp_server.core.header import SESSION_FORMAT_VERSION, SessionHeader
from acp_server.core.projection import tail_start
from acp_server.core.stream import AssistantText, TextDelta
from acp_server.core.tail import TailPrefix, fold_prefix
from acp_server.server.held_history import HeldHistory
from acp_server.storage.api import Opened, Store
from acp_server.storage.jsonl.store import JsonlStore
from acp_server.storage.jsonl.tail_prefix import write_prefix
from acp_server.storage.url import StoreUrl, open_store, parse_store_url

pytestmark = pytest.mark.anyio

ENGINES = [
    "jsonl",
    "jsonl-zstd",
    "sqlite",
    pytest.param("postgresql", marks=pytest.mark.process),
]


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def store(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[Store]:
    if engine == "jsonl-zstd":  # its backward index walks frames, not lines
        zstd = JsonlStore(tmp_path / "sessions", compression="zstd")
        yield zstd
        await zstd.aclose()
        return
    if engine == "postgresql":
        url = parse_store_url(request.getfixturevalue("postgres_url"))
    elif engine == "sqlite":
        url = StoreUrl("sqlite", tmp_path / "sessions.db", f"sqlite://{tmp_path}/sessions.db")
    else:
        url = StoreUrl("jsonl", tmp_path / "sessions", str(tmp_path / "sessions"))
    opened = open_store(url)
    await opened.prepare()
    try:
        yield opened
    finally:
        await opened.aclose()


class Session:
    """Events on contiguous seqs, shaped as the agent loop writes them."""

    def __init__(self) -> None:
        self.events: list[SessionEvent] = []
        self.turns = 0

    def add(self, cls: Any, data: Any, **envelope: Any) -> SessionEvent:
        event: SessionEvent = cls(len(self.events), 10_000 + len(self.events), data, **envelope)
        self.events.append(event)
        return event

    def turn(self, *, end: bool = True) -> None:
        turn = self.turns
        self.turns += 1
        self.add(TurnStart, TurnStartData(turn))
        prompt = UserMessage(f"u{turn}", [TextContent(f"question {turn}")])
        self.add(UserMessageEvent, UserMessageData(turn, prompt))
        self.add(StepStart, StepData(turn, 0))
        first = len(self.events)
        for k in range(3):
            self.add(AssistantChunk, AssistantChunkData(turn, 0, TextDelta(0, f"w{k} ")))
        message = AssistantMessage(f"a{turn}", [AssistantText("w0 w1 w2 ")])
        self.add(
            AssistantMessageEvent,
            AssistantMessageData(turn, 0, message),
            source_range=(first, len(self.events) - 1),
        )
        if end:
            self.add(StepEnd, StepData(turn, 0))
            self.add(TurnEnd, TurnEndData(turn, TurnEndReasonCompleted()))

    def compact(self) -> None:
        """A `/compact` turn: everything before it summarised."""
        turn = self.turns
        self.turns += 1
        through = len(self.events) - 1
        self.add(TurnStart, TurnStartData(turn))
        prompt = UserMessage(f"u{turn}", [TextContent("/compact")])
        self.add(UserMessageEvent, UserMessageData(turn, prompt))
        self.add(StepStart, StepData(turn, 0))
        summary = AssistantMessage(f"a{turn}", [AssistantText(f"summary {turn}")])
        self.add(AssistantMessageEvent, AssistantMessageData(turn, 0, summary))
        self.add(StepEnd, StepData(turn, 0))
        self.add(ContextCompaction, ContextCompactionData(turn, 0, through))
        done = [TextContent("Compacted.")]
        self.add(CommandResult, CommandResultData(turn, "compact", done))
        self.add(TurnEnd, TurnEndData(turn, TurnEndReasonCompleted()))


def compacted_session(turns: int = 12, every: int = 4) -> Session:
    session = Session()
    session.add(SessionMode, SessionModeData("plan"))
    for k in range(turns):
        if k == 1:
            session.add(SessionTitle, SessionTitleData("the title"))
        if k == 2:
            session.add(SessionConfig, SessionConfigData("model", "m2"))
        if k and k % every == 0:
            session.compact()
        session.turn()
    return session


def header() -> SessionHeader:
    return SessionHeader(version=SESSION_FORMAT_VERSION, id="s1", created_at=1000, cwd="/work")


async def stored(store: Store, events: list[SessionEvent], *, batch: int = 5) -> None:
    writer = await store.create(header())
    for k in range(0, len(events), batch):
        writer.append(events[k : k + batch])
        await writer.flush()
    await writer.close()


async def both(store: Store, max_messages: int) -> tuple[Opened, Opened]:
    """The session opened for a tail, then (once that is closed) opened whole."""
    tail = await store.open_tail("s1", 5, max_messages)
    await tail.writer.close()
    whole = await store.open("s1", 5)
    await whole.writer.close()
    return tail, whole


async def test_a_tail_open_holds_the_suffix_a_whole_open_holds(store: Store) -> None:
    session = compacted_session()
    await stored(store, session.events)
    tail, whole = await both(store, 4)
    base = tail.log.base
    assert 0 < base <= tail_start(whole.log, 4).start
    assert tail.log.events(base) == whole.log.events(base)
    assert (len(tail.log), tail.log.turns, tail.log.step_starts) == (
        len(whole.log),
        whole.log.turns,
        whole.log.step_starts,
    )
    assert tail_start(tail.log, 4) == tail_start(whole.log, 4)


async def test_a_tail_open_reads_back_to_the_turn_after_the_latest_compaction(
    store: Store,
) -> None:
    session = compacted_session()
    await stored(store, session.events)
    tail = await store.open_tail("s1", 5, 1)
    await tail.writer.close()
    compaction = [e for e in session.events if type(e) is ContextCompaction][-1]
    assert tail.log.base == compaction.data.through_seq + 1


async def test_the_settings_before_the_base_are_in_the_prefix(store: Store) -> None:
    session = compacted_session()
    await stored(store, session.events)
    tail, _ = await both(store, 2)
    settings = [e for e in session.events if type(e) in (SessionMode, SessionConfig, SessionTitle)]
    assert tail.log.base > settings[-1].seq
    assert tail.log.prefix.events == settings
    assert list(tail.log.plain_events())[:3] == settings


async def test_a_session_without_a_compaction_is_held_whole(store: Store) -> None:
    session = Session()
    for _ in range(6):
        session.turn()
    await stored(store, session.events)
    tail, whole = await both(store, 2)
    assert tail.log.base == 0
    assert tail.log.events() == whole.log.events()


async def test_a_session_shorter_than_the_tail_is_held_whole(store: Store) -> None:
    session = compacted_session(turns=6, every=3)
    await stored(store, session.events)
    tail, whole = await both(store, 50)
    assert tail.log.base == 0
    assert tail.log.events() == whole.log.events()


async def test_an_empty_session_opens_for_a_tail(store: Store) -> None:
    await stored(store, [])
    tail = await store.open_tail("s1", 5, 3)
    await tail.writer.close()
    assert (tail.log.base, len(tail.log), tail.closers) == (0, 0, [])


async def test_a_tail_open_closes_an_interrupted_turn_as_a_whole_open_would(
    store: Store,
) -> None:
    session = compacted_session()
    session.turn(end=False)
    await stored(store, session.events)
    tail = await store.open_tail("s1", 5, 2)
    await tail.writer.close()
    end = len(session.events)
    assert [type(e) for e in tail.closers] == [StepEnd, TurnEnd]
    assert [e.seq for e in tail.closers] == [end, end + 1]
    assert tail.closers[-1].data.reason == TurnEndReasonInterrupted()
    assert (await store.read("s1")).events[end:] == tail.closers


async def test_a_session_opened_for_a_tail_is_appended_to_after_its_last_seq(
    store: Store,
) -> None:
    session = compacted_session()
    await stored(store, session.events)
    tail = await store.open_tail("s1", 5, 2)
    more = Session()
    more.events = list(session.events)
    more.turns = session.turns
    more.turn()
    tail.writer.append(more.events[len(session.events) :])
    await tail.writer.close()
    assert (await store.read("s1")).events == more.events


async def test_a_prefix_kept_by_one_tail_open_serves_the_next(store: Store) -> None:
    session = compacted_session()
    await stored(store, session.events)
    first = await store.open_tail("s1", 5, 2)
    first.writer.append([SessionTitle(len(session.events), 1, SessionTitleData("renamed"))])
    await first.writer.close()
    again = await store.open_tail("s1", 5, 2)
    await again.writer.close()
    titles = [e for e in again.log.plain_events() if type(e) is SessionTitle]
    assert titles[-1].data.title == "renamed"
    assert again.log.base == first.log.base


@pytest.mark.parametrize("engine", ["jsonl", "jsonl-zstd"])  # the JSONL engine's files
async def test_a_jsonl_log_without_its_prefix_file_is_held_whole(
    engine: str, store: Store, tmp_path: Path
) -> None:
    session = compacted_session()
    await stored(store, session.events)
    (tmp_path / "sessions" / "s1" / "tail-prefix.jsonl").unlink()
    held = await store.open_tail("s1", 5, 2)
    await held.writer.close()
    assert held.log.base == 0
    again = await store.open_tail("s1", 5, 2)  # the whole open kept the file
    await again.writer.close()
    assert again.log.base > 0


@pytest.mark.parametrize("engine", ["jsonl"])  # the JSONL engine's files
async def test_a_jsonl_tail_open_cuts_a_torn_final_line_as_a_whole_open_does(
    engine: str, store: Store, tmp_path: Path
) -> None:
    session = compacted_session()
    await stored(store, session.events)
    path = tmp_path / "sessions" / "s1" / "session.jsonl"
    whole_size = path.stat().st_size
    with path.open("ab") as log:
        log.write(b'{"type":"turn/start","seq":')
    tail = await store.open_tail("s1", 5, 2)
    await tail.writer.close()
    assert (tail.dropped_torn_tail, len(tail.log), path.stat().st_size) == (
        True,
        len(session.events),
        whole_size,
    )


async def test_a_session_held_from_its_base_pages_as_the_store_does(store: Store) -> None:
    session = compacted_session()
    await stored(store, session.events)
    tail = await store.open_tail("s1", 5, 2)
    try:
        source = await store.history("s1")
        held = HeldHistory(header(), lambda: tail.log, source)
        end = len(session.events)
        assert 0 < tail.log.base < end
        for max_messages in (1, 2, 3, 7, 50):
            for page_end in range(1, end + 1, 5):
                assert await held.page(page_end, max_messages) == await source.page(
                    page_end, max_messages
                )
        for lo, hi in ((0, end), (3, tail.log.base + 4), (tail.log.base, end - 2)):
            assert await held.records(lo, hi) == await source.records(lo, hi)
    finally:
        await tail.writer.close()


@pytest.mark.process
async def test_a_postgresql_role_that_only_reads_and_writes_the_tables_opens_the_store(
    postgres_url: str,
) -> None:
    import psycopg

    owner = open_store(parse_store_url(postgres_url))
    await owner.prepare()  # the tables and the index, made by their owner
    await owner.aclose()
    role = f"rw_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'pw'")
        conn.execute(
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}"
        )
    scheme, _, rest = postgres_url.partition("://")
    where = rest.rpartition("@")[2]
    user = open_store(parse_store_url(f"{scheme}://{role}:pw@{where}"))
    try:
        await user.prepare()
        await stored(user, compacted_session().events)
        tail = await user.open_tail("s1", 5, 2)
        await tail.writer.close()
        assert tail.log.base > 0
    finally:
        await user.aclose()


@pytest.mark.parametrize("engine", ["jsonl", "jsonl-zstd"])  # the JSONL engine's files
async def test_a_jsonl_prefix_file_that_covers_less_is_carried_on_from_the_log(
    engine: str, store: Store, tmp_path: Path
) -> None:
    session = compacted_session()
    await stored(store, session.events)
    # As a build that keeps no prefix file leaves it: covering the session's first 3 events.
    write_prefix(
        tmp_path / "sessions" / "s1" / "tail-prefix.jsonl",
        3,
        fold_prefix(TailPrefix(), session.events[:3]),
    )
    tail, whole = await both(store, 2)
    assert tail.log.base > 3
    assert tail.log.prefix == fold_prefix(TailPrefix(), session.events[: tail.log.base])
    assert list(tail.log.plain_events())[: len(tail.log.prefix.events)] == [
        e for e in session.events if type(e) in (SessionMode, SessionConfig, SessionTitle)
    ]
    assert whole.log.step_starts == tail.log.step_starts


async def test_a_session_rewound_after_its_latest_compaction_is_held_whole(store: Store) -> None:
    session = compacted_session()
    session.add(SessionRewind, SessionRewindData("u10", [], []))
    session.turn()
    await stored(store, session.events)
    tail, whole = await both(store, 2)
    assert tail.log.base == 0
    assert tail.log.events() == whole.log.events()
