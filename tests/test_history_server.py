"""`session.page` (SPEC 3, 3.1) through the real server process, and paging a log on disk.

The server is spawned as a subprocess and driven with raw JSON lines: params checks, the
subagent address checks, canonical rows from a log whose rows the flushes split, live pages
equal to cold ones (plain and Zstandard logs), a torn final line, a log growing under its
index, a corrupt line. The property test runs in-process over `LogIndex` built from real files
written in random flush batches, indexed from their end in steps of every size.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest.mock import patch

import msgspec
import pytest
import zstandard
from acp_process import AcpProcess
from hypothesis import given
from hypothesis import strategies as st
from msgspec import UNSET
from strategies import batch_cuts, session_events, split
from surface_values import session_setup

from acp_server.core.chunk_rows import ROW_CLASSES, pack_chunk_runs
from acp_server.core.content import TextContent
from acp_server.core.event_log import EventLog
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
    SubagentStart,
    SubagentStartData,
    ToolCall,
    ToolCallData,
    ToolResult,
    ToolResultData,
    TurnEnd,
    TurnEndData,
    TurnEndReasonCompleted,
    TurnStart,
    TurnStartData,
    UnknownEvent,
    UserMessage,
    UserMessageData,
    UserMessageEvent,
)
from acp_server.core.header import SESSION_FORMAT_VERSION, SessionHeader
from acp_server.core.history import expand_history_records, to_history_records
from acp_server.core.paging import PageCut
from acp_server.core.stream import (
    AssistantReasoning,
    AssistantText,
    AssistantToolCall,
    BlockEnd,
    BlockStart,
    Finish,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
)
from acp_server.storage.errors import CorruptLog
from acp_server.storage.jsonl import readers
from acp_server.storage.jsonl.index import LogIndex
from acp_server.storage.jsonl.lines import Compression
from acp_server.storage.jsonl.log import read_log
from acp_server.storage.jsonl.sessions import SessionStore

MESSAGE_TYPES = (UserMessageEvent, AssistantMessageEvent)
T0 = 1_760_000_000_000


def wire(value: Any) -> Any:
    """A value as the JSON a peer sees (structs encoded, then parsed back)."""
    return msgspec.json.decode(msgspec.json.encode(value))


def canonical(events: list[SessionEvent]) -> bytes:
    """The encoded records SPEC 3.1 requires for a page holding exactly `events`."""
    return msgspec.json.encode(to_history_records(pack_chunk_runs(events)))


def encoded(records: list[Any]) -> bytes:
    """Records as the server sent them (parsed JSON keeps their keys' order)."""
    return msgspec.json.encode(records)


def spec_page_start(events: list[SessionEvent], end: int, max_messages: int) -> int:
    """SPEC 3.1 read literally: walk back from `end` counting messages; cut at the lowest seq
    among each counted message and its `sourceRange` start; with too few, reach seq 0."""
    lowest, counted = end, 0
    for event in reversed(events[:end]):
        if isinstance(event, MESSAGE_TYPES):
            counted += 1
            source = event.source_range
            lowest = min(lowest, event.seq, source[0] if isinstance(source, tuple) else event.seq)
            if counted == max_messages:
                return lowest
    return 0


# ---------------------------------------------------------------------------------------------
# Logs written directly, as another process would have left them.


def header(session_id: str, **fields: Any) -> SessionHeader:
    return SessionHeader(
        version=SESSION_FORMAT_VERSION, id=session_id, created_at=T0, cwd="/work", **fields
    )


def write_log(
    root: Path,
    session_id: str,
    batches: list[list[SessionEvent]],
    *,
    compression: Compression = "none",
    **fields: Any,
) -> Path:
    """A session log written by `LogWriter`, one flush (one packed batch, one zstd frame) per batch."""
    store = SessionStore(root, compression=compression)
    writer = store.create(header(session_id, **fields))
    for batch in batches:
        writer.append(batch)
        writer.flush()
    writer.close()
    return store.log_path(session_id)


def conversation(turns: int) -> list[SessionEvent]:
    """Whole turns as the loop writes them, with `sourceRange`s that name real seqs.

    Each turn: a step streaming reasoning, text and a tool call (then the call and its result),
    and a second step streaming the answer.
    """
    events: list[SessionEvent] = []

    def add(kind: type, data: Any, **envelope: Any) -> int:
        seq = len(events)
        events.append(kind(seq, T0 + 7 * seq - (seq % 5), data, **envelope))
        return seq

    def chunk(turn: int, step: int, value: Any) -> int:
        return add(AssistantChunk, AssistantChunkData(turn, step, value))

    for turn in range(turns):
        add(TurnStart, TurnStartData(turn))
        add(
            UserMessageEvent,
            UserMessageData(turn, UserMessage(f"u{turn}", [TextContent(f"question {turn}")])),
        )
        add(StepStart, StepData(turn, 0))
        first = chunk(turn, 0, BlockStart(0, "reasoning"))
        thought = [f"hm{k} " for k in range(5 + turn)]
        for text in thought:
            chunk(turn, 0, ReasoningDelta(0, text))
        chunk(turn, 0, BlockEnd(0))
        chunk(turn, 0, BlockStart(1, "text"))
        said = [f"w{k}" if k % 3 else " " for k in range(11)]
        for text in said:
            chunk(turn, 0, TextDelta(1, text))
        chunk(turn, 0, BlockEnd(1))
        chunk(turn, 0, BlockStart(2, "tool-call"))
        arguments = ['{"pa', 'th": ', '"a.tx', 't"}']
        chunk(turn, 0, ToolCallDelta(2, f"call_{turn}", arguments[0], "read_file"))
        for fragment in arguments[1:]:
            chunk(turn, 0, ToolCallDelta(2, f"call_{turn}", fragment))
        chunk(turn, 0, BlockEnd(2))
        last = chunk(turn, 0, Finish("tool-calls"))
        blocks: list[Any] = [
            AssistantReasoning("".join(thought)),
            AssistantText("".join(said)),
            AssistantToolCall(f"call_{turn}", "read_file", "".join(arguments)),
        ]
        add(
            AssistantMessageEvent,
            AssistantMessageData(turn, 0, AssistantMessage(f"a{turn}-0", blocks)),
            source_range=(first, last),
        )
        call = add(ToolCall, ToolCallData(turn, 0, f"call_{turn}", "read_file", "".join(arguments)))
        add(
            ToolResult,
            ToolResultData(turn, 0, f"call_{turn}", [TextContent("hello")]),
            source_range=(call, call),
        )
        add(StepEnd, StepData(turn, 0))
        add(StepStart, StepData(turn, 1))
        first = chunk(turn, 1, BlockStart(0, "text"))
        answer = [f"a{k}" for k in range(40 + 3 * turn)]
        for text in answer:
            chunk(turn, 1, TextDelta(0, text))
        chunk(turn, 1, BlockEnd(0))
        last = chunk(turn, 1, Finish("stop"))
        message = AssistantMessage(f"a{turn}-1", [AssistantText("".join(answer))])
        add(
            AssistantMessageEvent,
            AssistantMessageData(turn, 1, message),
            source_range=(first, last),
        )
        add(StepEnd, StepData(turn, 1))
        add(TurnEnd, TurnEndData(turn, TurnEndReasonCompleted()))
    return events


def address(session_id: str) -> dict[str, str]:
    return {"kind": "session", "sessionId": session_id}


def subagent(parent: str, child: str) -> dict[str, str]:
    return {"kind": "subagent", "parentSessionId": parent, "childSessionId": child}


def walk(
    server: AcpProcess, where: dict[str, str], through: int, max_messages: int
) -> list[dict[str, Any]]:
    """Every page from `through` back to seq 0, newest first, as the server answers them."""
    pages: list[dict[str, Any]] = []
    params: dict[str, Any] = {"address": where, "throughSeq": through, "maxMessages": max_messages}
    while True:
        page = server.result("session.page", params)
        pages.append(page)
        if not page["hasMore"]:
            return pages
        params = {**params, "beforeSeq": expand_history_records(page["records"])[0].seq}


# ---------------------------------------------------------------------------------------------
# Params (SPEC 3.1): each violation is -32602 naming the field.

CHILD_EVENTS = [
    TurnStart(0, T0, TurnStartData(0)),
    TurnEnd(1, T0 + 1, TurnEndData(0, TurnEndReasonCompleted())),
]


def spawned(child: str, seq: int = 0) -> SubagentStart:
    """The `subagent/start` a parent's log holds for `child`."""
    return SubagentStart(seq, T0 + seq, SubagentStartData(0, 0, "call_task", child, "one-shot"))


@pytest.fixture(scope="module")
def disk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sessions root beside a directory `outside` that holds a valid log of its own."""
    base = tmp_path_factory.mktemp("history")
    root = base / "sessions"
    write_log(root, "plain", [conversation(1)])
    write_log(root, "empty", [])
    write_log(root, "parent", [[spawned("child")]])
    write_log(root, "child", [CHILD_EVENTS], origin="subagent", parent_session="parent")
    write_log(root, "stranger", [CHILD_EVENTS], origin="subagent", parent_session="someone-else")
    write_log(root, "orphan", [CHILD_EVENTS], origin="subagent", parent_session="plain")
    write_log(root, "unspawned", [CHILD_EVENTS], origin="subagent", parent_session="parent")
    write_log(root, "not-a-child", [CHILD_EVENTS], parent_session="parent")
    # A log a malformed id would reach if it were joined to the root unchecked.
    write_log(base, "outside", [CHILD_EVENTS])
    return root


@pytest.fixture(scope="module")
def shared(disk: Path) -> Iterator[AcpProcess]:
    """One server over `disk` for the tests that only read (nothing here changes a log)."""
    with AcpProcess(disk) as process:
        process.initialize()
        yield process


PLAIN_LAST = len(conversation(1)) - 1


@pytest.mark.process
@pytest.mark.parametrize(
    ("params", "path"),
    [
        ({"throughSeq": -2}, "$.throughSeq"),
        ({"throughSeq": -(2**40)}, "$.throughSeq"),
        ({"throughSeq": "3"}, "$.throughSeq"),
        ({"throughSeq": None}, "$.throughSeq"),
        ({"throughSeq": True}, "$.throughSeq"),
        ({"throughSeq": False}, "$.throughSeq"),
        ({"throughSeq": 1.5}, "$.throughSeq"),
        ({"throughSeq": 3.0}, "$.throughSeq"),
        ({"throughSeq": PLAIN_LAST + 1}, "$.throughSeq"),
        ({"throughSeq": 2**53}, "$.throughSeq"),
        ({"beforeSeq": -1}, "$.beforeSeq"),
        ({"beforeSeq": "4"}, "$.beforeSeq"),
        ({"beforeSeq": 4.0}, "$.beforeSeq"),
        ({"beforeSeq": True}, "$.beforeSeq"),
        ({"beforeSeq": None}, "$.beforeSeq"),
        ({"maxMessages": 0}, "$.maxMessages"),
        ({"maxMessages": -1}, "$.maxMessages"),
        ({"maxMessages": "5"}, "$.maxMessages"),
        ({"maxMessages": 2.0}, "$.maxMessages"),
        ({"maxMessages": True}, "$.maxMessages"),
    ],
)
def test_out_of_range_or_mistyped_params_are_invalid_params_naming_the_field(
    shared: AcpProcess, params: dict[str, Any], path: str
) -> None:
    error = shared.error(
        "session.page", {"address": address("plain"), "throughSeq": PLAIN_LAST, **params}
    )
    assert error["code"] == -32602
    assert error["data"]["path"] == path
    assert f"`{path}`" in error["message"]


@pytest.mark.process
def test_through_seq_past_the_last_seq_says_which_is_the_last(shared: AcpProcess) -> None:
    error = shared.error(
        "session.page", {"address": address("plain"), "throughSeq": PLAIN_LAST + 1}
    )
    assert error["data"] == {"path": "$.throughSeq"}
    assert f"last seq {PLAIN_LAST}" in error["message"]
    # An empty session's last seq is -1: only throughSeq -1 can be asked for.
    assert shared.result("session.page", {"address": address("empty"), "throughSeq": -1}) == {
        "records": [],
        "hasMore": False,
    }
    assert shared.error("session.page", {"address": address("empty"), "throughSeq": 0})["data"] == {
        "path": "$.throughSeq"
    }


@pytest.mark.process
def test_the_bounds_themselves_are_valid(shared: AcpProcess) -> None:
    events = conversation(1)
    through = {"address": address("plain"), "throughSeq": PLAIN_LAST}
    assert shared.result("session.page", {**through, "throughSeq": -1}) == {
        "records": [],
        "hasMore": False,
    }
    assert shared.result("session.page", {**through, "beforeSeq": 0}) == {
        "records": [],
        "hasMore": False,
    }
    whole = shared.result("session.page", {**through, "maxMessages": 1, "beforeSeq": 2**53 - 1})
    assert expand_history_records(whole["records"])[-1].seq == PLAIN_LAST
    everything = shared.result("session.page", through)  # maxMessages defaults to 50
    assert (encoded(everything["records"]), everything["hasMore"]) == (canonical(events), False)


@pytest.mark.process
@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"throughSeq": 0}, "address"),
        ({"maxMessages": 1}, "address"),
    ],
)
def test_missing_required_params_are_named(
    shared: AcpProcess, params: dict[str, Any], field: str
) -> None:
    error = shared.error("session.page", params)
    assert error["code"] == -32602
    assert f"missing required field `{field}`" in error["message"]


@pytest.mark.process
def test_a_page_without_through_seq_is_the_newest_and_answers_the_seq_it_was_cut_at(
    shared: AcpProcess,
) -> None:
    plain = {"address": address("plain"), "maxMessages": 1}
    newest = shared.result("session.page", {**plain, "throughSeq": PLAIN_LAST})
    assert shared.result("session.page", plain) == {**newest, "throughSeq": PLAIN_LAST}


@pytest.mark.process
def test_an_empty_session_paged_without_through_seq_answers_minus_one(shared: AcpProcess) -> None:
    assert shared.result("session.page", {"address": address("empty")}) == {
        "records": [],
        "hasMore": False,
        "throughSeq": -1,
    }


@pytest.mark.process
def test_a_page_without_through_seq_takes_before_seq_too(shared: AcpProcess) -> None:
    plain = {"address": address("plain"), "beforeSeq": 0}
    assert shared.result("session.page", plain) == {
        "records": [],
        "hasMore": False,
        "throughSeq": PLAIN_LAST,
    }


@pytest.mark.process
@pytest.mark.parametrize("params", [None, [], ["plain", 0]])
def test_params_that_are_not_an_object_are_invalid(shared: AcpProcess, params: Any) -> None:
    frame = shared.request("session.page", params)
    assert frame["error"]["code"] == -32602


@pytest.mark.process
@pytest.mark.parametrize(
    ("where", "path"),
    [
        ({"kind": "file", "sessionId": "plain"}, "$.address.kind"),
        ({"kind": "Session", "sessionId": "plain"}, "$.address.kind"),
        ({"sessionId": "plain"}, "$.address"),
        ("plain", "$.address"),
        ({"kind": "session"}, "$.address"),
        ({"kind": "session", "sessionId": 7}, "$.address.sessionId"),
        ({"kind": "subagent", "parentSessionId": "parent"}, "$.address"),
    ],
)
def test_malformed_addresses_are_invalid_params(shared: AcpProcess, where: Any, path: str) -> None:
    error = shared.error("session.page", {"address": where, "throughSeq": 0})
    assert error["code"] == -32602
    assert error["data"]["path"] == path


@pytest.mark.process
@pytest.mark.parametrize(
    "session_id", ["../outside", "..", "", "-lead", "a/b", "a b", "ü", "x" * 129, "outside\n"]
)
@pytest.mark.parametrize("method", ["session.page", "session.follow"])
def test_a_malformed_session_id_is_refused_before_it_reaches_the_file_system(
    shared: AcpProcess, disk: Path, method: str, session_id: str
) -> None:
    # `disk/../outside/session.jsonl` is a real log: joined unchecked, "../outside" would read it.
    assert (disk.parent / "outside" / "session.jsonl").is_file()
    error = shared.error(method, {"address": address(session_id), "throughSeq": 0})
    assert error["code"] == -32602
    assert error["data"] == {"path": "$.address.sessionId"}
    assert "invalid session id" in error["message"]


@pytest.mark.process
@pytest.mark.parametrize(
    ("where", "path"),
    [
        (subagent("../outside", "child"), "$.address.parentSessionId"),
        (subagent("parent", "../outside"), "$.address.childSessionId"),
        (subagent("parent", ""), "$.address.childSessionId"),
    ],
)
def test_a_malformed_id_in_a_subagent_address_is_refused(
    shared: AcpProcess, where: Any, path: str
) -> None:
    error = shared.error("session.page", {"address": where, "throughSeq": 0})
    assert error["code"] == -32602
    assert error["data"] == {"path": path}


@pytest.mark.process
@pytest.mark.parametrize(
    ("where", "unknown"),
    [
        (address("nobody"), "nobody"),
        (subagent("parent", "nobody"), "nobody"),
        # The child names a parent that does not exist.
        (subagent("someone-else", "stranger"), "someone-else"),
    ],
)
def test_an_unknown_well_formed_session_is_32002(
    shared: AcpProcess, where: Any, unknown: str
) -> None:
    error = shared.error("session.page", {"address": where, "throughSeq": 0})
    assert error == {
        "code": -32002,
        "message": f"Unknown session: {unknown}",
        "data": {"sessionId": unknown},
    }


# ---------------------------------------------------------------------------------------------
# Subagent addresses (SPEC 3): each check, named in `data.check`.


@pytest.mark.process
def test_a_subagent_child_is_paged_through_the_parent_that_started_it(shared: AcpProcess) -> None:
    page = shared.result("session.page", {"address": subagent("parent", "child"), "throughSeq": 1})
    assert (encoded(page["records"]), page["hasMore"]) == (canonical(CHILD_EVENTS), False)
    followed = shared.result("session.follow", {"address": subagent("parent", "child")})
    assert (followed["cursor"], encoded(followed["records"]), followed["header"]["origin"]) == (
        1,
        canonical(CHILD_EVENTS),
        "subagent",
    )
    shared.result("session.unfollow", {"subscriptionId": followed["subscriptionId"]})


@pytest.mark.process
@pytest.mark.parametrize(
    ("where", "check"),
    [
        # The child's header does not say origin "subagent".
        (subagent("parent", "not-a-child"), "origin"),
        (subagent("parent", "plain"), "origin"),
        # The child's header names another parent.
        (subagent("parent", "stranger"), "parentSession"),
        (subagent("plain", "child"), "parentSession"),
        # The parent named in the header holds no subagent/start for the child.
        (subagent("plain", "orphan"), "subagentStart"),
        (subagent("parent", "unspawned"), "subagentStart"),
        # A child addressed as a plain session.
        (address("child"), "origin"),
    ],
)
@pytest.mark.parametrize("method", ["session.page", "session.follow"])
def test_each_failed_subagent_check_is_named(
    shared: AcpProcess, method: str, where: Any, check: str
) -> None:
    error = shared.error(method, {"address": where, "throughSeq": 0})
    assert error["code"] == -32602
    assert error["data"] == {"path": "$.address", "check": check}
    assert error["message"].startswith("Invalid params: address: ")


@pytest.mark.process
def test_subagent_checks_read_a_live_parent_too(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    write_log(root, "parent", [[TurnStart(0, T0, TurnStartData(0)), spawned("child", seq=1)]])
    write_log(root, "child", [CHILD_EVENTS], origin="subagent", parent_session="parent")
    write_log(root, "unspawned", [CHILD_EVENTS], origin="subagent", parent_session="parent")
    with AcpProcess(root) as server:
        server.initialize()
        # Resuming makes the parent live here: its events come from memory, not the file.
        assert server.result("session/resume", {"sessionId": "parent", "cwd": "/work"}) == (
            session_setup()
        )
        page = server.result(
            "session.page", {"address": subagent("parent", "child"), "throughSeq": 1}
        )
        assert encoded(page["records"]) == canonical(CHILD_EVENTS)
        error = server.error(
            "session.page", {"address": subagent("parent", "unspawned"), "throughSeq": 1}
        )
        assert error["data"] == {"path": "$.address", "check": "subagentStart"}


# ---------------------------------------------------------------------------------------------
# Pages of a log whose rows the flushes split are canonical.


def flushed_every(events: list[SessionEvent], size: int) -> list[list[SessionEvent]]:
    return [events[k : k + size] for k in range(0, len(events), size)]


@pytest.mark.process
@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_pages_of_a_log_written_in_many_flushes_are_canonical(
    tmp_path: Path, compression: Compression
) -> None:
    events = conversation(4)
    path = write_log(tmp_path, "split", flushed_every(events, 7), compression=compression)
    stored = read_log(path).records
    # The precondition: the flushes really split runs, so the file is not canonical.
    assert len(stored) > len(pack_chunk_runs(events))
    assert sum(type(r) in ROW_CLASSES for r in stored) > sum(
        type(r) in ROW_CLASSES for r in pack_chunk_runs(events)
    )
    last = events[-1].seq
    with AcpProcess(tmp_path) as server:
        server.initialize()
        for max_messages in (1, 2, 3, 5, 50):
            pages = walk(server, address("split"), last, max_messages)
            end = last + 1
            for page in pages:
                start = spec_page_start(events, end, max_messages)
                assert (encoded(page["records"]), page["hasMore"]) == (
                    canonical(events[start:end]),
                    start > 0,
                )
                end = start
            assert end == 0
        # A page that starts and ends inside rows splits them only at its bounds.
        for through, before in ((40, 37), (last - 3, last - 20)):
            page = server.result(
                "session.page",
                {
                    "address": address("split"),
                    "throughSeq": through,
                    "beforeSeq": before,
                    "maxMessages": 1,
                },
            )
            start = spec_page_start(events, before, 1)
            assert encoded(page["records"]) == canonical(events[start:before])


# ---------------------------------------------------------------------------------------------
# Live pages equal cold pages.


def allow(frame: dict[str, Any]) -> Any:
    assert frame["method"] == "session/request_permission", frame
    return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}


@pytest.mark.process
@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_a_live_session_pages_as_the_same_session_cold(tmp_path: Path, compression: str) -> None:
    root, workspace = tmp_path / "sessions", tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "hello.py").write_text('print("Helo world")\n')
    flags = ("--compression", compression, "--pace-ms", "1")
    with AcpProcess(root, *flags) as server:
        server.initialize()
        session_id = server.result("session/new", {"cwd": str(workspace), "mcpServers": []})[
            "sessionId"
        ]
        response, _ = server.exchange(
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": "fix it"}]},
            answer=allow,
        )
        assert response["result"] == {"stopReason": "end_turn"}
        last = server.result("session.follow", {"address": address(session_id), "maxMessages": 1})[
            "cursor"
        ]
        live = {n: walk(server, address(session_id), last, n) for n in (1, 2, 3, 50)}
        assert server.finish() == 0
    log_name = "session.jsonl.zst" if compression == "zstd" else "session.jsonl"
    events = read_log(root / session_id / log_name).events
    assert events[-1].seq == last
    with AcpProcess(root, *flags) as server:
        server.initialize()
        cold = {n: walk(server, address(session_id), last, n) for n in (1, 2, 3, 50)}
    assert cold == live
    for max_messages, pages in cold.items():
        walked = [
            event for page in reversed(pages) for event in expand_history_records(page["records"])
        ]
        assert walked == events
        assert len(pages) > 1 or max_messages == 50
        for page in pages:
            assert encoded(page["records"]) == canonical(expand_history_records(page["records"]))


# ---------------------------------------------------------------------------------------------
# A torn final line is ignored, and the file is left as it is.


@pytest.mark.process
@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_a_torn_final_line_is_ignored_and_the_file_unchanged(
    tmp_path: Path, compression: Compression
) -> None:
    events = conversation(2)
    path = write_log(tmp_path, "torn", flushed_every(events, 25), compression=compression)
    whole = path.read_bytes()
    if compression == "zstd":
        # Most of another frame: an append cut short.
        line = msgspec.json.encode(TurnStart(len(events), T0, TurnStartData(9))) + b"\n"
        torn = whole + zstandard.ZstdCompressor(write_checksum=True).compress(line)[:-3]
    else:
        torn = whole + b'{"type":"turn/start","seq":%d,"ti' % len(events)
    path.write_bytes(torn)
    last = events[-1].seq
    with AcpProcess(tmp_path) as server:
        server.initialize()
        error = server.error("session.page", {"address": address("torn"), "throughSeq": last + 1})
        assert error["data"] == {"path": "$.throughSeq"}
        pages = walk(server, address("torn"), last, 3)
        followed = server.result("session.follow", {"address": address("torn"), "maxMessages": 3})
    assert [
        e for page in reversed(pages) for e in expand_history_records(page["records"])
    ] == events
    assert (followed["cursor"], followed["records"]) == (last, pages[0]["records"])
    assert path.read_bytes() == torn


@pytest.mark.process
def test_the_index_of_a_cold_log_grows_with_the_file(tmp_path: Path) -> None:
    events = conversation(3)
    cut = next(e.seq for e in events if isinstance(e, TurnStart) and e.seq > 0)
    write_log(tmp_path, "growing", [events[:cut]])
    with AcpProcess(tmp_path) as server:
        server.initialize()
        first = server.result(
            "session.page", {"address": address("growing"), "throughSeq": cut - 1}
        )
        assert encoded(first["records"]) == canonical(events[:cut])
        # Another process continues the log (a torn tail first, which it truncates away).
        path = tmp_path / "growing" / "session.jsonl"
        with open(path, "ab") as file:
            file.write(b'{"type":"turn/st')
        assert server.error("session.page", {"address": address("growing"), "throughSeq": cut})[
            "data"
        ] == {"path": "$.throughSeq"}
        continued = SessionStore(tmp_path).continue_session("growing", T0)
        for batch in flushed_every(events[cut:], 9):
            continued.writer.append(batch)
            continued.writer.flush()
        continued.writer.close()
        pages = walk(server, address("growing"), events[-1].seq, 2)
    assert [
        e for page in reversed(pages) for e in expand_history_records(page["records"])
    ] == events


# ---------------------------------------------------------------------------------------------
# The property: walking a real log's pages gives back the log, whole messages per page.


def realistic(events: list[SessionEvent]) -> list[SessionEvent]:
    """`events` on seqs from 0 (a log starts there), with each `sourceRange` as SPEC 1.1 has
    it: an `assistant/message`'s names the run of chunks just before it, as the loop writes
    it; a `tool/result`'s names its `tool/call`; any other names earlier seqs (or is left out)."""
    out: list[SessionEvent] = []
    for seq, event in enumerate(events):
        event = msgspec.structs.replace(event, seq=seq)
        source: Any = event.source_range
        if isinstance(event, AssistantMessageEvent) and source is not UNSET:
            first = seq
            while first > 0 and isinstance(out[first - 1], AssistantChunk):
                first -= 1
            source = (first, seq - 1) if first < seq else UNSET
        elif isinstance(event, ToolResult) and source is not UNSET:
            calls = [
                e.seq
                for e in out
                if isinstance(e, ToolCall) and e.data.call_id == event.data.call_id
            ]
            source = (calls[-1], calls[-1]) if calls else UNSET
        elif isinstance(source, tuple) and not source[0] <= source[1] < seq:
            source = UNSET
        out.append(msgspec.structs.replace(event, source_range=source))
    return out


def live_log(batches: list[list[SessionEvent]]) -> EventLog:
    """An `EventLog` as a live session holds it: appended one by one, sealed per flush."""
    log = EventLog()
    for batch in batches:
        for event in batch:
            log.append(event)
        log.seal()
    return log


TORN = {
    "none": b'{"type":"turn/start","se',
    "zstd": zstandard.ZstdCompressor(write_checksum=True).compress(b'{"x":1}\n')[:-5],
}


@given(session_events(), st.data())
def test_walking_the_pages_of_a_log_on_disk_gives_back_the_log(
    events: list[SessionEvent], data: st.DataObject
) -> None:
    events = realistic(events)
    batches = split(events, data.draw(batch_cuts(len(events))))
    compression = data.draw(st.sampled_from(["none", "zstd"]))
    max_messages = data.draw(st.integers(1, 4))
    # Small steps make the index reach back from the end in many steps, as it does in a long log.
    block, frames = data.draw(
        st.sampled_from([(1, 1), (50, 2), (400, 3), (readers.MIN_BLOCK, readers.MIN_FRAMES)])
    )
    built_after = data.draw(st.integers(0, len(batches)))
    """The index is built after this many batches, and refreshed at the end."""
    torn = data.draw(st.booleans())
    with (
        tempfile.TemporaryDirectory() as tmp,
        patch.object(readers, "MIN_BLOCK", block),
        patch.object(readers, "MIN_FRAMES", frames),
    ):
        store = SessionStore(tmp, compression=compression)
        writer = store.create(header("prop"))
        path = store.log_path("prop")
        index = None
        for n, batch in enumerate(batches):
            if n == built_after:
                index = LogIndex.build(path)
                index.page(index.length, max_messages)  # what it indexed stays, for later pages
            writer.append(batch)
            writer.flush()
        writer.close()
        if torn:
            with open(path, "ab") as file:
                file.write(TORN[compression])
        before = path.read_bytes()
        if index is None:
            index = LogIndex.build(path)
        else:
            index.refresh()
        stored = EventLog(read_log(path).records)
        live = live_log(batches)
        assert index.last_seq == len(events) - 1
        walked: list[SessionEvent] = []
        end = len(events)
        while True:
            cut, records = index.page(end, max_messages)
            assert (cut.end, cut.start) == (end, spec_page_start(events, end, max_messages))
            page_events = expand_history_records(wire(to_history_records(records)))
            assert page_events == events[cut.start : cut.end]
            # Whole messages: every assistant/message's chunks are on its page.
            for event in page_events:
                if isinstance(event, AssistantMessageEvent) and isinstance(
                    event.source_range, tuple
                ):
                    assert cut.start <= event.source_range[0] <= event.source_range[1] < cut.end
            # Canonical rows, and the same page as an in-memory log gives.
            encoded = msgspec.json.encode((cut, records))
            assert encoded == msgspec.json.encode((cut, pack_chunk_runs(page_events)))
            assert msgspec.json.encode(stored.page(end, max_messages)) == encoded
            assert msgspec.json.encode(live.page(end, max_messages)) == encoded
            walked[:0] = page_events
            if not cut.has_more:
                break
            assert cut.start < end
            end = cut.start
        assert walked == events
        # Pages read again from the file (the index is warm now) are the same.
        if events:
            assert msgspec.json.encode(
                index.page(len(events), max_messages)
            ) == msgspec.json.encode(live.page(len(events), max_messages))
        assert path.read_bytes() == before


# ---------------------------------------------------------------------------------------------
# A corrupt line is found when a page reaches it (and pages that do not reach it are served).


def write_lines(path: Path, lines: list[bytes], compression: Compression, batch: int = 5) -> None:
    """A log's lines written as they are: plain, or one Zstandard frame per `batch` lines."""
    if compression == "none":
        path.write_bytes(b"".join(line + b"\n" for line in lines))
        return
    compressor = zstandard.ZstdCompressor(write_checksum=True)
    chunks = [lines[:1], *(lines[k : k + batch] for k in range(1, len(lines), batch))]
    path.write_bytes(
        b"".join(compressor.compress(b"".join(line + b"\n" for line in chunk)) for chunk in chunks)
    )


def corrupt_row(line: bytes) -> bytes:
    row = msgspec.json.decode(line)
    row["data"]["dt"].append(1)
    return msgspec.json.encode(row)


def unsafe_row(line: bytes) -> bytes:
    row = msgspec.json.decode(line)
    row["time0"] = 2**53 - 2
    return msgspec.json.encode(row)


def unknown_event(line: bytes) -> bytes:
    event = msgspec.json.decode(line)
    event["type"] = "future/event"
    return msgspec.json.encode(event)


def wrong_seq(line: bytes) -> bytes:
    event = msgspec.json.decode(line)
    event["seq"] += 1
    return msgspec.json.encode(event)


@pytest.mark.parametrize(
    ("target", "corrupt", "problem"),
    [
        ("text-chunks", lambda line: line[:-9], "invalid JSON"),
        ("turn/start", lambda line: b"0" + line[1:], "invalid JSON"),
        ("text-chunks", corrupt_row, "dt has"),
        ("text-chunks", unsafe_row, "safe-integer range"),
        ("turn/start", unknown_event, "not marked ignorable"),
        ("step/end", wrong_seq, "seq gap"),
    ],
)
@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_a_corrupt_line_is_reported_by_the_page_that_reaches_it(
    tmp_path: Path, compression: Compression, target: str, corrupt: Any, problem: str
) -> None:
    events = conversation(6)
    lines = write_log(tmp_path, "good", flushed_every(events, 9)).read_bytes().splitlines()
    # The first line of its kind in the second turn: the newest pages do not reach it.
    second_turn = next(k for k, line in enumerate(lines) if b'"turn/start"' in line and k > 1)
    bad = next(
        k
        for k, line in enumerate(lines)
        if k > second_turn and msgspec.json.decode(line)["type"] == target
    )
    lines[bad] = corrupt(lines[bad])
    path = tmp_path / ("bad.jsonl.zst" if compression == "zstd" else "bad.jsonl")
    write_lines(path, lines, compression)
    with patch.object(readers, "MIN_BLOCK", 100), patch.object(readers, "MIN_FRAMES", 1):
        index = LogIndex.build(path)
        cut, records = index.page(len(events), 2)
        assert expand_history_records(wire(to_history_records(records))) == events[cut.start :]
        with pytest.raises(CorruptLog) as caught:
            while cut.has_more:
                cut, records = index.page(cut.start, 2)
    assert problem in caught.value.reason
    # Line numbers count from 1, the header being line 1 (a seq gap is seen between two lines).
    assert caught.value.line in ((bad + 1, bad + 2) if problem == "seq gap" else (bad + 1,))


@pytest.mark.process
def test_a_corrupt_line_is_a_distinct_error_on_the_wire(tmp_path: Path) -> None:
    events = conversation(2)
    lines = write_log(tmp_path, "bad", [events]).read_bytes().splitlines()
    bad = next(k for k, line in enumerate(lines) if b'"text-chunks"' in line)
    lines[bad] = corrupt_row(lines[bad])
    write_lines(tmp_path / "bad" / "session.jsonl", lines, "none")
    with AcpProcess(tmp_path) as server:
        server.initialize()
        error = server.error(
            "session.page", {"address": address("bad"), "throughSeq": len(events) - 1}
        )
    assert error["code"] == -32010
    assert error["data"] == {
        "reason": "corrupt",
        "line": bad + 1,
        "detail": error["data"]["detail"],
    }
    assert "dt has" in error["data"]["detail"]


def test_an_ignorable_unknown_event_of_any_data_shape_does_not_break_the_index(
    tmp_path: Path,
) -> None:
    body: list[SessionEvent] = [TurnStart(0, T0, TurnStartData(0))]
    for data in (
        [1, 2],
        "text",
        3,
        {"dt": "x"},
        {"childSessionId": 5},
        {"dt": [1, 2], "childSessionId": "c"},
    ):
        body.append(UnknownEvent("future/event", len(body), T0, data, True))
    path = write_log(tmp_path, "future", [body])
    index = LogIndex.build(path)
    assert index.page(len(body), 50)[1] == body
    assert index.subagent_children == set()
    assert os.path.getsize(path) == index.indexed_bytes


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_a_refresh_after_the_file_was_replaced_by_a_shorter_log_indexes_the_new_one(
    tmp_path: Path, compression: Compression
) -> None:
    longer, shorter = conversation(3), conversation(1)
    path = write_log(tmp_path / "a", "s", [longer], compression=compression)
    index = LogIndex.build(path)
    assert index.page(len(longer), 50)[1] == pack_chunk_runs(longer)
    replacement = write_log(tmp_path / "b", "t", [shorter], compression=compression)
    os.replace(replacement, path)

    index.refresh()

    assert index.header.id == "t"
    assert index.length == len(shorter)
    assert index.page(len(shorter), 50) == (PageCut(0, len(shorter)), pack_chunk_runs(shorter))


# ---------------------------------------------------------------------------------------------
# Following a session that is deleted.


def frames_until(server: AcpProcess, done: Any) -> list[dict[str, Any]]:
    """Frames read until `done(frames)` holds."""
    frames: list[dict[str, Any]] = []
    while not done(frames):
        frames.append(server.read_frame())
    return frames


def ended(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f["params"] for f in frames if f.get("method") == "session.followEnded"]


@pytest.mark.process
def test_a_follower_of_a_session_that_is_deleted_is_ended_with_reason_deleted(
    tmp_path: Path,
) -> None:
    write_log(tmp_path, "doomed", [conversation(1)])
    with AcpProcess(tmp_path) as server:
        server.initialize()
        follow = server.result("session.follow", {"address": address("doomed")})
        server.send_request("session/delete", {"sessionId": "doomed"}, id="delete")
        frames = frames_until(server, lambda fs: ended(fs) and any("id" in f for f in fs))
        assert server.finish() == 0
    assert [f for f in frames if "id" in f] == [{"jsonrpc": "2.0", "id": "delete", "result": {}}]
    assert ended(frames) == [
        {"subscriptionId": follow["subscriptionId"], "reason": "deleted", "lastSeq": PLAIN_LAST}
    ]


@pytest.mark.process
def test_a_follow_sent_right_after_a_delete_is_refused_or_ended_never_left_open(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    with AcpProcess(tmp_path / "sessions") as server:
        server.initialize()
        new = server.result("session/new", {"cwd": str(workspace), "mcpServers": []})
        session_id = new["sessionId"]
        delete = {"sessionId": session_id}
        follow = {"address": address(session_id)}
        server.send_raw(  # one write: the follow arrives while the delete is under way
            msgspec.json.encode(
                {"jsonrpc": "2.0", "id": "delete", "method": "session/delete", "params": delete}
            )
            + b"\n"
            + msgspec.json.encode(
                {"jsonrpc": "2.0", "id": "follow", "method": "session.follow", "params": follow}
            )
            + b"\n"
        )
        frames = frames_until(
            server,
            lambda fs: (
                {f.get("id") for f in fs} >= {"delete", "follow"}
                and bool(ended(fs) or any(f.get("id") == "follow" and "error" in f for f in fs))
            ),
        )
        assert server.finish() == 0
    assert [f for f in frames if f.get("id") == "delete"] == [
        {"jsonrpc": "2.0", "id": "delete", "result": {}}
    ]
    [answer] = [f for f in frames if f.get("id") == "follow"]
    if "error" in answer:
        assert answer["error"] == {
            "code": -32002,
            "message": f"Unknown session: {session_id}",
            "data": {"sessionId": session_id},
        }
        assert ended(frames) == []
    else:
        result = answer["result"]
        assert ended(frames) == [
            {"subscriptionId": result["subscriptionId"], "reason": "deleted", "lastSeq": -1}
        ]
