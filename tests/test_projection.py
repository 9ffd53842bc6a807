"""The load projection (SPEC 4.2): a log replayed as `session/update`s showing completed content,
and the tail cut used to replay only the newest messages.

Every projected update is also checked against the official ACP models.
"""

from __future__ import annotations

from typing import Any

import acp.schema
import msgspec
import pytest
from acp_models import exact
from hypothesis import given
from strategies import session_events

from acp_server.agent.tools import BUILTIN_TOOLS
from acp_server.core.acp_updates import SessionNotification, SessionUpdate
from acp_server.core.chunk_rows import pack_chunk_runs
from acp_server.core.content import ContentBlock, ImageContent, TextContent, ToolResultContent
from acp_server.core.event_log import EventLog
from acp_server.core.events import (
    AssistantChunk,
    AssistantChunkData,
    AssistantMessage,
    AssistantMessageData,
    AssistantMessageEvent,
    ContextCompaction,
    ContextCompactionData,
    ErrorInfo,
    PlanEntry,
    PlanUpdate,
    PlanUpdateData,
    SessionEvent,
    SessionNotice,
    SessionNoticeData,
    SessionTitle,
    SessionTitleData,
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
    TurnEndReasonError,
    TurnStart,
    TurnStartData,
    UserMessage,
    UserMessageData,
    UserMessageEvent,
)
from acp_server.core.projection import TailCut, project_load, tail_start
from acp_server.core.stream import (
    AssistantBlock,
    AssistantReasoning,
    AssistantText,
    AssistantToolCall,
    BlockEnd,
    BlockStart,
    Finish,
    ReasoningDelta,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
    Usage,
    UsageChunk,
)


class Log:
    """Builds a session's events on contiguous seqs, the way the loop writes them."""

    def __init__(self) -> None:
        self.events: list[SessionEvent] = []
        self.turn = -1
        self.step = -1

    def _add(self, event_type: type, data: Any, **envelope: Any) -> None:
        self.events.append(event_type(len(self.events), 1000 + len(self.events), data, **envelope))

    def user(self, *content: ContentBlock) -> Log:
        self.turn += 1
        self.step = -1
        self._add(TurnStart, TurnStartData(self.turn))
        self._add(
            UserMessageEvent,
            UserMessageData(self.turn, UserMessage(f"u{self.turn}", list(content))),
        )
        return self

    def chunks(self, *chunks: StreamChunk) -> Log:
        self.step += 1
        self._add(StepStart, StepData(self.turn, self.step))
        for chunk in chunks:
            self._add(AssistantChunk, AssistantChunkData(self.turn, self.step, chunk))
        return self

    def message(self, *content: AssistantBlock, interrupted: bool = False) -> Log:
        first = (
            next(
                i
                for i, e in enumerate(self.events)
                if type(e) is StepStart and e.data.step == self.step and e.data.turn == self.turn
            )
            + 1
        )
        data = AssistantMessageData(
            self.turn,
            self.step,
            AssistantMessage(f"a{self.turn}-{self.step}", list(content)),
            Usage(10, 2),
            True if interrupted else msgspec.UNSET,
        )
        self._add(AssistantMessageEvent, data, source_range=(first, len(self.events) - 1))
        return self

    def tool(
        self,
        call_id: str,
        name: str,
        arguments: str,
        *content: ToolResultContent,
        error: bool = False,
        raw: Any = msgspec.UNSET,
    ) -> Log:
        self._add(ToolCall, ToolCallData(self.turn, self.step, call_id, name, arguments))
        call_seq = len(self.events) - 1
        data = ToolResultData(
            self.turn, self.step, call_id, list(content), True if error else msgspec.UNSET, raw
        )
        self._add(ToolResult, data, source_range=(call_seq, call_seq))
        return self

    def step_end(self) -> Log:
        self._add(StepEnd, StepData(self.turn, self.step))
        return self

    def turn_end(self, reason: Any = None) -> Log:
        self._add(TurnEnd, TurnEndData(self.turn, reason or TurnEndReasonCompleted()))
        return self

    def plan(self, *entries: PlanEntry) -> Log:
        self._add(PlanUpdate, PlanUpdateData(list(entries)))
        return self

    def title(self, title: str) -> Log:
        self._add(SessionTitle, SessionTitleData(title))
        return self

    def compaction(self, through: int) -> Log:
        self._add(ContextCompaction, ContextCompactionData(self.turn, self.step, through))
        return self

    def answer(self, text: str) -> Log:
        """A whole step that answers with `text` and stops."""
        return (
            self.chunks(TextDelta(0, text), Finish("stop")).message(AssistantText(text)).step_end()
        )


def shown(updates: list[SessionUpdate]) -> list[dict[str, Any]]:
    """The updates as JSON, each checked against the official ACP `SessionNotification`."""
    wire = []
    for update in updates:
        params = msgspec.json.decode(msgspec.json.encode(SessionNotification("sess-1", update)))
        exact(acp.schema.SessionNotification, params, "a replayed update")
        wire.append(params["update"])
    return wire


def text(t: str) -> dict[str, str]:
    return {"type": "text", "text": t}


def user_chunk(t: str, message_id: str) -> dict[str, Any]:
    return {"sessionUpdate": "user_message_chunk", "content": text(t), "messageId": message_id}


def agent_chunk(t: str, message_id: str) -> dict[str, Any]:
    return {"sessionUpdate": "agent_message_chunk", "content": text(t), "messageId": message_id}


def thought_chunk(t: str, message_id: str) -> dict[str, Any]:
    return {"sessionUpdate": "agent_thought_chunk", "content": text(t), "messageId": message_id}


# ---------------------------------------------------------------------------------------------
# Project load.


def test_empty_log_replays_nothing() -> None:
    assert project_load([], BUILTIN_TOOLS.present) == []


def test_user_message_blocks_become_user_message_chunks_with_the_message_id() -> None:
    log = Log().user(TextContent("look at this"), ImageContent("aGk=", "image/png"))

    assert shown(project_load(log.events, BUILTIN_TOOLS.present)) == [
        user_chunk("look at this", "u0"),
        {
            "sessionUpdate": "user_message_chunk",
            "content": {"type": "image", "data": "aGk=", "mimeType": "image/png"},
            "messageId": "u0",
        },
    ]


def test_completed_step_shows_thoughts_text_then_each_tool_call_and_its_result() -> None:
    log = (
        Log()
        .user(TextContent("read both"))
        .chunks(
            BlockStart(0, "reasoning"),
            ReasoningDelta(0, "Two "),
            ReasoningDelta(0, "files."),
            BlockEnd(0),
            TextDelta(1, "Reading "),
            TextDelta(1, "them."),
            ToolCallDelta(2, "c1", '{"path": "a.txt"}', "read_file"),
            ToolCallDelta(3, "c2", '{"path": "b.txt"}', "read_file"),
            UsageChunk(Usage(10, 2)),
            Finish("tool-calls"),
        )
        .message(
            AssistantReasoning("Two files."),
            AssistantText("Reading them."),
            AssistantToolCall("c1", "read_file", '{"path": "a.txt"}'),
            AssistantToolCall("c2", "read_file", '{"path": "b.txt"}'),
        )
        .tool("c1", "read_file", '{"path": "a.txt"}', TextContent("alpha"), raw={"bytes": 5})
        .tool("c2", "read_file", '{"path": "b.txt"}', TextContent("no such file"), error=True)
        .step_end()
    )

    assert shown(project_load(log.events, BUILTIN_TOOLS.present)) == [
        user_chunk("read both", "u0"),
        thought_chunk("Two files.", "a0-0"),
        agent_chunk("Reading them.", "a0-0"),
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "c1",
            "title": "Read a.txt",
            "kind": "read",
            "status": "pending",
            "rawInput": {"path": "a.txt"},
            "name": "read_file",
        },
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c1",
            "status": "completed",
            "content": [{"type": "content", "content": text("alpha")}],
            "rawOutput": {"bytes": 5},
            "name": "read_file",
        },
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "c2",
            "title": "Read b.txt",
            "kind": "read",
            "status": "pending",
            "rawInput": {"path": "b.txt"},
            "name": "read_file",
        },
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c2",
            "status": "failed",
            "content": [{"type": "content", "content": text("no such file")}],
            "name": "read_file",
        },
    ]


def test_chunks_of_a_completed_step_are_not_replayed_one_by_one() -> None:
    log = (
        Log()
        .user(TextContent("hi"))
        .chunks(TextDelta(0, "Hel"), TextDelta(0, "lo"), TextDelta(0, "!"), Finish("stop"))
        .message(AssistantText("Hello!"))
        .step_end()
        .turn_end()
    )

    assert shown(project_load(log.events, BUILTIN_TOOLS.present)) == [
        user_chunk("hi", "u0"),
        agent_chunk("Hello!", "a0-0"),
    ]


def test_blocks_of_a_message_are_shown_in_their_order() -> None:
    log = (
        Log()
        .user(TextContent("q"))
        .chunks(Finish("stop"))
        .message(AssistantText("first"), AssistantReasoning("then thinking"), AssistantText("last"))
    )

    assert shown(project_load(log.events, BUILTIN_TOOLS.present))[1:] == [
        agent_chunk("first", "a0-0"),
        thought_chunk("then thinking", "a0-0"),
        agent_chunk("last", "a0-0"),
    ]


def test_tool_call_without_a_result_shows_only_the_pending_call() -> None:
    log = (
        Log()
        .user(TextContent("q"))
        .chunks(Finish("tool-calls"))
        .message(AssistantToolCall("c1", "run_command", '{"command": "make"}'))
    )

    assert shown(project_load(log.events, BUILTIN_TOOLS.present))[1:] == [
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "c1",
            "title": "Run make",
            "kind": "execute",
            "status": "pending",
            "rawInput": {"command": "make"},
            "name": "run_command",
        }
    ]


def test_failed_stream_shows_the_text_and_reasoning_its_chunks_delivered() -> None:
    log = (
        Log()
        .user(TextContent("q"))
        .chunks(
            ReasoningDelta(0, "Let me "),
            ReasoningDelta(0, "think"),
            TextDelta(1, "The answer "),
            TextDelta(1, "is"),
            ToolCallDelta(2, "c1", '{"pa', "read_file"),
        )
        .step_end()
        .turn_end(TurnEndReasonError(ErrorInfo("overloaded", 529)))
    )

    assert shown(project_load(log.events, BUILTIN_TOOLS.present)) == [
        user_chunk("q", "u0"),
        thought_chunk("Let me think", "assistant-0-0"),
        agent_chunk("The answer is", "assistant-0-0"),
    ]


def test_crashed_stream_at_the_end_of_the_log_shows_what_it_delivered() -> None:
    log = Log().user(TextContent("q")).chunks(TextDelta(0, "cut "), TextDelta(0, "off"))

    assert shown(project_load(log.events, BUILTIN_TOOLS.present)) == [
        user_chunk("q", "u0"),
        agent_chunk("cut off", "assistant-0-0"),
    ]


def test_failed_stream_that_delivered_no_text_shows_nothing() -> None:
    log = (
        Log()
        .user(TextContent("q"))
        .chunks(BlockStart(0, "text"), ToolCallDelta(1, "c1", "{", "read_file"))
        .step_end()
    )

    assert shown(project_load(log.events, BUILTIN_TOOLS.present)) == [user_chunk("q", "u0")]


def test_interrupted_message_shows_what_was_received() -> None:
    log = (
        Log()
        .user(TextContent("q"))
        .chunks(
            ReasoningDelta(0, "Hmm"), TextDelta(1, "Part"), ToolCallDelta(2, "c1", "{", "read_file")
        )
        .message(AssistantReasoning("Hmm"), AssistantText("Part"), interrupted=True)
        .step_end()
        .turn_end()
    )

    assert shown(project_load(log.events, BUILTIN_TOOLS.present)) == [
        user_chunk("q", "u0"),
        thought_chunk("Hmm", "a0-0"),
        agent_chunk("Part", "a0-0"),
    ]


def test_plan_and_title_are_shown_where_they_happened() -> None:
    log = (
        Log()
        .user(TextContent("plan it"))
        .title("Planning")
        .chunks(Finish("tool-calls"))
        .message(AssistantToolCall("c1", "todo_write", '{"todos": []}'))
        .plan(PlanEntry("Read", "high", "completed"), PlanEntry("Write", "low", "pending"))
        .tool("c1", "todo_write", '{"todos": []}', TextContent("plan updated"))
        .step_end()
    )

    assert shown(project_load(log.events, BUILTIN_TOOLS.present)) == [
        user_chunk("plan it", "u0"),
        {"sessionUpdate": "session_info_update", "title": "Planning"},
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "c1",
            "title": "Update the plan",
            "kind": "think",
            "status": "pending",
            "rawInput": {"todos": []},
            "name": "todo_write",
        },
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c1",
            "status": "completed",
            "content": [{"type": "content", "content": text("plan updated")}],
            "name": "todo_write",
        },
        {
            "sessionUpdate": "plan",
            "entries": [
                {"content": "Read", "priority": "high", "status": "completed"},
                {"content": "Write", "priority": "low", "status": "pending"},
            ],
        },
    ]


def test_a_compaction_shows_as_an_agent_message_with_the_summary() -> None:
    log = Log().user(TextContent("I am Ada")).answer("Hello Ada").turn_end()
    through = len(log.events) - 1
    log.user(TextContent("/compact")).answer("The user is Ada.").compaction(through).turn_end()

    assert shown(project_load(log.events))[2:] == [
        user_chunk("/compact", "u1"),
        agent_chunk("The conversation was compacted. Summary:\n\nThe user is Ada.", "a1-0"),
    ]


def as_json(updates: list[SessionUpdate]) -> list[dict[str, Any]]:
    """The updates as JSON, unchecked: the Python SDK's models predate the newer shapes (the
    wire tests hold those to the TypeScript SDK's schema)."""
    return [msgspec.to_builtins(update) for update in updates]


def test_to_a_client_that_takes_compactions_a_compaction_replays_as_a_completed_update() -> None:
    log = Log().user(TextContent("I am Ada")).answer("Hello Ada").turn_end()
    through = len(log.events) - 1
    log.user(TextContent("/compact")).answer("The user is Ada.").compaction(through).turn_end()

    assert as_json(project_load(log.events, compactions=True))[2:] == [
        user_chunk("/compact", "u1"),
        {
            "sessionUpdate": "compaction_update",
            "compactionId": "compaction-1-0",
            "status": "completed",
            "summary": [text("The user is Ada.")],
        },
    ]


def test_a_notice_is_not_replayed() -> None:
    log = Log().user(TextContent("hi"))
    log.events.append(
        SessionNotice(len(log.events), 0, SessionNoticeData("warning", "Retrying", "HTTP 503"))
    )
    log.answer("Hello").turn_end()

    assert shown(project_load(log.events)) == [user_chunk("hi", "u0"), agent_chunk("Hello", "a0-0")]


def test_a_multi_step_turn_replays_every_step_in_log_order() -> None:
    log = (
        Log()
        .user(TextContent("read it"))
        .chunks(Finish("tool-calls"))
        .message(AssistantToolCall("c1", "read_file", '{"path": "a"}'))
        .tool("c1", "read_file", '{"path": "a"}', TextContent("A"))
        .step_end()
        .answer("It says A.")
        .turn_end()
        .user(TextContent("thanks"))
        .answer("You're welcome.")
        .turn_end()
    )

    assert [
        (u["sessionUpdate"], u.get("messageId"))
        for u in shown(project_load(log.events, BUILTIN_TOOLS.present))
    ] == [
        ("user_message_chunk", "u0"),
        ("tool_call", None),
        ("tool_call_update", None),
        ("agent_message_chunk", "a0-1"),
        ("user_message_chunk", "u1"),
        ("agent_message_chunk", "a1-0"),
    ]


def test_start_skips_the_events_before_it() -> None:
    log = Log().user(TextContent("one")).answer("first").turn_end()
    second_turn = len(log.events)
    log.user(TextContent("two")).answer("second").turn_end()

    assert shown(project_load(log.events[second_turn:], BUILTIN_TOOLS.present)) == [
        user_chunk("two", "u1"),
        agent_chunk("second", "a1-0"),
    ]


# ---------------------------------------------------------------------------------------------
# Tail cut.


def three_turns() -> tuple[list[SessionEvent], list[int]]:
    """Turn 0: a tool step and an answer (3 messages); turn 1: a plain answer (2); turn 2: a
    tool step and an answer (3). Returns the events and each turn's `turn/start` seq."""
    log = Log()
    starts = []
    for turn in range(3):
        starts.append(len(log.events))
        log.user(TextContent(f"q{turn}"))
        if turn != 1:
            log.chunks(Finish("tool-calls")).message(
                AssistantToolCall(f"c{turn}", "read_file", "{}")
            )
            log.tool(f"c{turn}", "read_file", "{}", TextContent("x")).step_end()
        log.answer(f"a{turn}").turn_end()
    return log.events, starts


@pytest.mark.parametrize(
    ("max_messages", "turn"),
    [(1, 2), (2, 2), (3, 2), (4, 1), (5, 1), (6, 0), (7, 0), (8, 0)],
)
def test_tail_start_moves_the_cut_back_to_the_turn_of_the_last_message_counted(
    max_messages: int, turn: int
) -> None:
    events, starts = three_turns()

    assert tail_start(EventLog(events), max_messages) == TailCut(starts[turn], starts[turn] > 0)


@pytest.mark.parametrize("max_messages", [9, 50])
def test_tail_start_with_more_room_than_messages_replays_everything(max_messages: int) -> None:
    events, _ = three_turns()

    assert tail_start(EventLog(events), max_messages) == TailCut(0, False)


def test_tail_start_of_an_empty_log_is_the_start() -> None:
    assert tail_start(EventLog([]), 5) == TailCut(0, False)


def test_tail_start_never_cuts_between_a_tool_call_and_its_result() -> None:
    events, _ = three_turns()

    for max_messages in range(1, 10):
        start = tail_start(EventLog(events), max_messages).start
        tail = events[start:]
        calls = {e.data.call_id for e in tail if type(e) is ToolCall}
        results = {e.data.call_id for e in tail if type(e) is ToolResult}
        assert calls == results
        assert start == 0 or type(events[start]) is TurnStart


def test_tail_start_needs_a_positive_max_messages() -> None:
    with pytest.raises(ValueError, match="max_messages must be positive"):
        tail_start(EventLog([]), 0)


def test_tail_replay_shows_only_the_newest_turns() -> None:
    events, starts = three_turns()
    cut = tail_start(EventLog(events), 2)

    assert [
        u["sessionUpdate"] for u in shown(project_load(events[cut.start :], BUILTIN_TOOLS.present))
    ] == [
        "user_message_chunk",
        "tool_call",
        "tool_call_update",
        "agent_message_chunk",
    ]
    assert cut == TailCut(starts[2], True)


@given(session_events())
def test_projecting_packed_records_equals_projecting_their_events(
    events: list[SessionEvent],
) -> None:
    packed = pack_chunk_runs(events)
    assert msgspec.json.encode(project_load(packed, BUILTIN_TOOLS.present)) == msgspec.json.encode(
        project_load(events, BUILTIN_TOOLS.present)
    )
