"""The conversation fold (acp_server.client.fold): each definition's nodes and changes, the
shared vectors (the JavaScript fold is held to the same ones), and packing that never changes
what a definition sees."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from fold_vectors import VECTORS, all_vectors, render
from hypothesis import given
from strategies import session_events

from acp_server.client import ConversationFold, FoldError, Journal, apply_change, fold_events
from acp_server.client.fold import FoldContext, default_definitions
from acp_server.core.chunk_rows import pack_chunk_runs
from acp_server.core.events import SessionEvent, convert_event
from acp_server.core.history import expand_history_records, to_history_records

VECTOR_FILES = sorted(VECTORS.glob("*.json"))


def _json(value: Any) -> Any:
    """A value as the other language reads it: through JSON text."""
    return json.loads(json.dumps(value))


def ev(seq: int, kind: str, **data: Any) -> dict[str, Any]:
    return {"type": kind, "seq": seq, "time": 0, "data": data}


def chunk(seq: int, chunk: dict[str, Any], turn: int = 0, step: int = 0) -> dict[str, Any]:
    return ev(seq, "assistant/chunk", turn=turn, step=step, chunk=chunk)


def text(seq: int, piece: str, index: int = 0) -> dict[str, Any]:
    return chunk(seq, {"type": "text-delta", "index": index, "text": piece})


def message(seq: int, content: list[Any], **extra: Any) -> dict[str, Any]:
    return ev(
        seq,
        "assistant/message",
        turn=0,
        step=0,
        message={"id": "assistant-0-0", "content": content},
        **extra,
    )


def text_node(**fields: Any) -> dict[str, Any]:
    node = {
        "id": "text/0/0/0",
        "kind": "text",
        "seq": 0,
        "lastSeq": 0,
        "turn": 0,
        "step": 0,
        "index": 0,
        "messageId": None,
        "text": "",
        "deltas": 0,
        "status": "streaming",
    }
    return node | fields


def tool_node(**fields: Any) -> dict[str, Any]:
    node = {
        "id": "tool/c",
        "kind": "tool",
        "seq": 0,
        "lastSeq": 0,
        "turn": 0,
        "step": 0,
        "callId": "c",
        "name": "",
        "title": "",
        "toolKind": "other",
        "status": "pending",
        "arguments": "",
        "input": None,
        "output": None,
        "rawOutput": None,
        "locations": [],
        "childSessionId": None,
    }
    return node | fields


def update(seq: int, node_id: str, set: dict[str, Any], append: Any = None) -> dict[str, Any]:
    return {"op": "update", "seq": seq, "id": node_id, "set": set, "append": append or {}}


# -- user messages -------------------------------------------------------------------------------


def test_a_user_message_starts_a_node_with_its_content() -> None:
    content = [{"type": "text", "text": "Hi"}]
    changes = ConversationFold().feed(
        ev(3, "user/message", turn=1, message={"id": "user-1", "content": content})
    )
    assert changes == [
        {
            "op": "start",
            "seq": 3,
            "node": {
                "id": "user/user-1",
                "kind": "user",
                "seq": 3,
                "lastSeq": 3,
                "turn": 1,
                "messageId": "user-1",
                "content": content,
            },
        }
    ]


# -- assistant text and thoughts -------------------------------------------------------------------


def test_a_text_block_starts_at_its_block_start_and_grows_by_each_delta() -> None:
    fold = ConversationFold()
    started = fold.feed(chunk(0, {"type": "block-start", "index": 0, "blockType": "text"}))
    grown = fold.feed(text(1, "Hel")) + fold.feed(text(2, "lo"))
    assert started == [{"op": "start", "seq": 0, "node": text_node()}]
    assert grown == [
        update(1, "text/0/0/0", {"lastSeq": 1, "deltas": 1}, {"text": "Hel"}),
        update(2, "text/0/0/0", {"lastSeq": 2, "deltas": 2}, {"text": "lo"}),
    ]
    assert fold.node("text/0/0/0") == text_node(lastSeq=2, text="Hello", deltas=2)


def test_the_steps_message_settles_the_text_with_its_whole_block() -> None:
    fold = ConversationFold()
    fold.feed_all([text(0, "Hel"), text(1, "lo")])
    changes = fold.feed(message(2, [{"type": "text", "text": "Hello"}]))
    assert changes == [
        update(
            2,
            "text/0/0/0",
            {"lastSeq": 2, "messageId": "assistant-0-0", "text": "Hello", "status": "done"},
        )
    ]


def test_a_reasoning_delta_starts_a_thought_without_a_block_start() -> None:
    changes = ConversationFold().feed(
        chunk(5, {"type": "reasoning-delta", "index": 1, "text": "Hm"})
    )
    assert changes == [
        {
            "op": "start",
            "seq": 5,
            "node": text_node(
                id="thought/0/0/1",
                kind="thought",
                seq=5,
                lastSeq=5,
                index=1,
                text="Hm",
                deltas=1,
            ),
        }
    ]


def test_a_step_that_ends_without_a_message_keeps_what_streamed_as_incomplete() -> None:
    fold = ConversationFold()
    fold.feed_all([text(0, "Part"), text(1, "ial")])
    assert fold.feed(ev(2, "step/end", turn=0, step=0)) == [
        update(2, "text/0/0/0", {"lastSeq": 2, "status": "incomplete"})
    ]
    assert fold.node("text/0/0/0") == text_node(
        lastSeq=2, text="Partial", deltas=2, status="incomplete"
    )


def test_a_turn_end_closes_the_blocks_of_its_turn_still_streaming() -> None:
    fold = ConversationFold()
    fold.feed(text(0, "a"))
    assert fold.feed(ev(1, "turn/end", turn=0, reason={"kind": "cancelled"})) == [
        update(1, "text/0/0/0", {"lastSeq": 1, "status": "incomplete"})
    ]


def test_an_interrupted_message_is_matched_past_the_blocks_that_received_no_text() -> None:
    fold = ConversationFold()
    fold.feed_all(
        [
            chunk(0, {"type": "block-start", "index": 0, "blockType": "text"}),
            text(1, "Part", index=1),
        ]
    )
    changes = fold.feed(message(2, [{"type": "text", "text": "Part"}], interrupted=True))
    assert changes == [
        update(
            2,
            "text/0/0/1",
            {"lastSeq": 2, "messageId": "assistant-0-0", "text": "Part", "status": "interrupted"},
        ),
        update(
            2, "text/0/0/0", {"lastSeq": 2, "messageId": "assistant-0-0", "status": "interrupted"}
        ),
    ]


def test_a_block_known_only_from_its_message_is_named_by_its_position() -> None:
    content = [{"type": "reasoning", "text": "r"}, {"type": "text", "text": "Done."}]
    changes = ConversationFold().feed(message(4, content))
    assert changes == [
        {
            "op": "start",
            "seq": 4,
            "node": text_node(
                id="thought/0/0/m0",
                kind="thought",
                seq=4,
                lastSeq=4,
                messageId="assistant-0-0",
                text="r",
                status="done",
            ),
        },
        {
            "op": "start",
            "seq": 4,
            "node": text_node(
                id="text/0/0/m1",
                seq=4,
                lastSeq=4,
                index=1,
                messageId="assistant-0-0",
                text="Done.",
                status="done",
            ),
        },
    ]


# -- tool calls ------------------------------------------------------------------------------------


def delta(seq: int, piece: str, **name: str) -> dict[str, Any]:
    return chunk(
        seq, {"type": "tool-call-delta", "index": 0, "id": "c", "argumentsDelta": piece} | name
    )


def test_a_tool_call_is_pending_while_its_arguments_stream_and_takes_its_name_when_it_comes() -> (
    None
):
    fold = ConversationFold()
    first = fold.feed(delta(0, ""))
    named = fold.feed(delta(1, '{"a":', name="grep"))
    assert first == [{"op": "start", "seq": 0, "node": tool_node()}]
    assert named == [
        update(1, "tool/c", {"lastSeq": 1, "name": "grep", "title": "grep"}, {"arguments": '{"a":'})
    ]


def test_a_tool_call_runs_from_its_tool_call_with_its_parsed_input() -> None:
    fold = ConversationFold()
    fold.feed(delta(0, "{}", name="grep"))
    changes = fold.feed(
        ev(1, "tool/call", turn=0, step=0, callId="c", name="grep", arguments='{"q": 1}')
    )
    assert changes == [
        update(
            1,
            "tool/c",
            {
                "lastSeq": 1,
                "name": "grep",
                "title": "grep",
                "toolKind": "other",
                "status": "in_progress",
                "arguments": '{"q": 1}',
                "input": {"q": 1},
                "locations": [],
            },
        )
    ]


def test_arguments_that_are_not_json_are_the_input_as_text() -> None:
    fold = ConversationFold()
    fold.feed(ev(0, "tool/call", turn=0, step=0, callId="c", name="t", arguments="{oops"))
    assert fold.node("tool/c") == tool_node(
        name="t", title="t", status="in_progress", arguments="{oops", input="{oops"
    )


def test_an_error_result_fails_the_call_with_its_output_raw_output_and_locations() -> None:
    fold = ConversationFold()
    fold.feed(ev(0, "tool/call", turn=0, step=0, callId="c", name="t", arguments="{}"))
    content = [{"type": "text", "text": "no"}]
    changes = fold.feed(
        ev(
            1,
            "tool/result",
            turn=0,
            step=0,
            callId="c",
            content=content,
            isError=True,
            rawOutput={"code": 2},
            locations=[{"path": "/a", "line": 3}],
        )
    )
    assert changes == [
        update(
            1,
            "tool/c",
            {
                "lastSeq": 1,
                "status": "failed",
                "output": content,
                "rawOutput": {"code": 2},
                "locations": [{"path": "/a", "line": 3}],
            },
        )
    ]


def test_a_result_completes_the_call() -> None:
    fold = ConversationFold()
    fold.feed(ev(0, "tool/call", turn=0, step=0, callId="c", name="t", arguments="{}"))
    fold.feed(ev(1, "tool/result", turn=0, step=0, callId="c", content=[]))
    assert fold.node("tool/c") == tool_node(
        lastSeq=1, name="t", title="t", status="completed", arguments="{}", input={}, output=[]
    )


def test_a_result_whose_call_is_older_than_the_history_held_starts_its_node() -> None:
    changes = ConversationFold().feed(ev(9, "tool/result", turn=0, step=0, callId="c", content=[]))
    assert changes == [
        {
            "op": "start",
            "seq": 9,
            "node": tool_node(seq=9, lastSeq=9, status="completed", output=[]),
        }
    ]


def test_a_call_whose_step_ends_without_its_tool_call_fails() -> None:
    fold = ConversationFold()
    fold.feed(delta(0, "{", name="grep"))
    assert fold.feed(ev(1, "step/end", turn=0, step=0)) == [
        update(1, "tool/c", {"lastSeq": 1, "status": "failed"})
    ]


def test_a_subagent_start_names_the_child_session_of_its_call() -> None:
    fold = ConversationFold()
    fold.feed(ev(0, "tool/call", turn=0, step=0, callId="c", name="task", arguments="{}"))
    changes = fold.feed(
        ev(1, "subagent/start", turn=0, step=0, callId="c", childSessionId="kid", mode="one-shot")
    )
    assert changes == [update(1, "tool/c", {"lastSeq": 1, "childSessionId": "kid"})]


def test_a_presenter_gives_a_called_tool_its_title_kind_and_locations() -> None:
    def present(name: str, tool_input: Any) -> dict[str, Any]:
        return {
            "title": f"Read {tool_input['path']}",
            "kind": "read",
            "locations": [{"path": "/a"}],
        }

    fold = ConversationFold(default_definitions(present))
    fold.feed(
        ev(0, "tool/call", turn=0, step=0, callId="c", name="read_file", arguments='{"path": "a"}')
    )
    assert fold.node("tool/c") == tool_node(
        name="read_file",
        title="Read a",
        toolKind="read",
        status="in_progress",
        arguments='{"path": "a"}',
        input={"path": "a"},
        locations=[{"path": "/a"}],
    )


# -- plan, title, mode -----------------------------------------------------------------------------


def test_each_plan_update_replaces_the_one_plan() -> None:
    fold = ConversationFold()
    first = [{"content": "a", "priority": "high", "status": "pending"}]
    second = [{"content": "a", "priority": "high", "status": "completed"}]
    started = fold.feed(ev(0, "plan/update", entries=first))
    updated = fold.feed(ev(1, "plan/update", entries=second))
    assert started == [
        {
            "op": "start",
            "seq": 0,
            "node": {"id": "plan", "kind": "plan", "seq": 0, "lastSeq": 0, "entries": first},
        }
    ]
    assert updated == [update(1, "plan", {"lastSeq": 1, "entries": second})]


def test_each_title_replaces_the_one_title() -> None:
    fold = ConversationFold()
    fold.feed_all([ev(0, "session/title", title="a"), ev(1, "session/title", title="b")])
    assert fold.nodes() == [{"id": "title", "kind": "title", "seq": 0, "lastSeq": 1, "title": "b"}]


def test_each_mode_change_is_a_node_where_it_happened() -> None:
    fold = ConversationFold()
    fold.feed_all([ev(7, "session/mode", modeId="plan"), ev(8, "session/mode", modeId="default")])
    assert fold.nodes() == [
        {"id": "mode/7", "kind": "mode", "seq": 7, "lastSeq": 7, "modeId": "plan"},
        {"id": "mode/8", "kind": "mode", "seq": 8, "lastSeq": 8, "modeId": "default"},
    ]


# -- the fold itself -------------------------------------------------------------------------------


def test_events_no_definition_claims_change_nothing() -> None:
    fold = ConversationFold()
    changes = fold.feed_all(
        [
            ev(0, "turn/start", turn=0),
            ev(1, "session/config", configId="x", value=True),
            chunk(2, {"type": "usage", "usage": {"inputTokens": 1, "outputTokens": 1}}),
        ]
    )
    assert (changes, fold.nodes(), fold.last_seq) == ([], [], 2)


def test_an_event_out_of_seq_order_is_refused() -> None:
    fold = ConversationFold()
    fold.feed(ev(4, "session/title", title="a"))
    with pytest.raises(
        FoldError, match=r"^seq 6 after seq 4: events are folded in seq order, each once$"
    ):
        fold.feed(ev(6, "session/title", title="b"))


def test_an_event_fed_twice_is_refused() -> None:
    fold = ConversationFold()
    fold.feed(ev(0, "session/title", title="a"))
    with pytest.raises(FoldError, match=r"^seq 0 after seq 0"):
        fold.feed(ev(0, "session/title", title="a"))


class _Recorder:
    name = "recorder"
    claims = ("session/title", "assistant/chunk")

    def __init__(self) -> None:
        self.seen: list[int] = []

    def fold(self, event: dict[str, Any], ctx: FoldContext) -> None:
        self.seen.append(event["seq"])


def test_a_definition_receives_each_event_it_claims_once_in_seq_order() -> None:
    recorder = _Recorder()
    fold = ConversationFold([recorder])
    fold.feed_all(
        [
            ev(0, "session/title", title="a"),
            ev(1, "turn/start", turn=0),
            text(2, "x"),
            text(3, "y"),
        ]
    )
    assert recorder.seen == [0, 2, 3]


def test_typed_events_fold_as_their_json() -> None:
    events = [
        convert_event(e)
        for e in [text(0, "a"), text(1, "b"), message(2, [{"type": "text", "text": "ab"}])]
    ]
    typed = fold_events(events)
    plain = fold_events([msgspec.to_builtins(e) for e in events])
    assert typed == plain


# -- the shared vectors ----------------------------------------------------------------------------


def test_the_vectors_cover_every_node_kind() -> None:
    kinds = {
        node["kind"]
        for path in VECTOR_FILES
        for node in json.loads(path.read_text(encoding="utf-8"))["nodes"]
    }
    assert kinds == {"user", "text", "thought", "tool", "plan", "title", "mode"}


def test_the_committed_vectors_are_what_the_generator_makes() -> None:
    made = all_vectors()
    assert sorted(path.stem for path in VECTOR_FILES) == sorted(made)
    for name, value in made.items():
        assert (VECTORS / f"{name}.json").read_text(encoding="utf-8") == render(value), name


@pytest.mark.parametrize("path", VECTOR_FILES, ids=lambda p: p.stem)
def test_the_fold_gives_the_vectors_changes_and_nodes(path: Path) -> None:
    vector = json.loads(path.read_text(encoding="utf-8"))
    fold = ConversationFold()
    changes = [change for event in vector["events"] for change in fold.feed(event)]
    assert _json(changes) == vector["changes"]
    assert _json(fold.nodes()) == vector["nodes"]


@pytest.mark.parametrize("path", VECTOR_FILES, ids=lambda p: p.stem)
def test_a_packed_page_folds_as_the_same_events_live(path: Path) -> None:
    vector = json.loads(path.read_text(encoding="utf-8"))
    assert any("chunks" in record for record in vector["records"])
    page = Journal.from_page(vector["records"], has_more=False).events
    assert fold_events(page) == fold_events(vector["events"])


@pytest.mark.parametrize("path", VECTOR_FILES, ids=lambda p: p.stem)
def test_applying_the_changes_gives_the_nodes(path: Path) -> None:
    vector = json.loads(path.read_text(encoding="utf-8"))
    nodes: dict[str, Any] = {}
    for change in vector["changes"]:
        apply_change(nodes, change)
    assert list(nodes.values()) == vector["nodes"]


@given(session_events())
def test_packing_never_changes_what_the_fold_makes(events: list[SessionEvent]) -> None:
    records = msgspec.to_builtins(to_history_records(pack_chunk_runs(events)))
    live = ConversationFold()
    live_changes = [change for event in events for change in live.feed(event)]
    assert fold_events(expand_history_records(records)) == (live_changes, live.nodes())
