"""Compaction through the real server (SPEC 4.6): `/compact` and the automatic one.

A loopback OpenAI-compatible server records every request, so the tests see exactly what the
model was sent after a compaction; the log, `session.page` and a load in a fresh process still
hold and show everything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp_process import AcpProcess
from fixtures_builder import Scenario, Step
from openai_server import FakeOpenAI, Response, Sse, call, chunk, text, usage
from polling import wait_until
from prompt_harness import PromptServer

from acp_server.core.compaction import COMPACTED_NOTICE, SUMMARY_PREAMBLE, SUMMARY_SYSTEM
from acp_server.core.content import TextContent
from acp_server.core.events import (
    ContextCompaction,
    ContextCompactionData,
    TurnEnd,
    UserMessageEvent,
)
from acp_server.storage.jsonl.log import read_log

pytestmark = pytest.mark.process

SUMMARY = "The user is Ada."


def answer(words: str, prompt_tokens: int = 30) -> Sse:
    return Sse([text(words), chunk(finish="stop"), usage(prompt_tokens, 5)])


def serve(tmp_path: Path, model: FakeOpenAI, *flags: str) -> AcpProcess:
    """Titles off: the model's script here is the turns' and the summaries' calls alone."""
    base = ("--provider", "openai", "--model", "gpt-4o", "--base-url", model.base_url)
    return AcpProcess(tmp_path / "sessions", *base, "--titles", "off", *flags)


def prompt(server: AcpProcess, session_id: str, words: str) -> list[dict[str, Any]]:
    """Run one prompt; the updates it sent."""
    params = {"sessionId": session_id, "prompt": [{"type": "text", "text": words}]}
    response, before = server.exchange("session/prompt", params)
    assert response["result"] == {"stopReason": "end_turn"}, response
    return [f["params"]["update"] for f in before if f.get("method") == "session/update"]


def new_session(server: AcpProcess, tmp_path: Path) -> str:
    server.initialize()
    result = server.result("session/new", {"cwd": str(tmp_path), "mcpServers": []})
    session_id: str = result["sessionId"]
    return session_id


def messages(body: dict[str, Any]) -> list[tuple[str, Any]]:
    """The messages of a request, the server's own system prompt left out (these tests are
    about the history; a summarising request's system message stays)."""
    values = [(m["role"], m.get("content")) for m in body["messages"]]
    if values and values[0][0] == "system" and values[0][1] != SUMMARY_SYSTEM:
        return values[1:]
    return values


def test_after_compact_the_model_gets_the_summary_and_only_what_followed(tmp_path: Path) -> None:
    script: list[Response] = [answer("Hello Ada."), answer(SUMMARY), answer("You are Ada.")]
    with FakeOpenAI(script) as model, serve(tmp_path, model) as server:
        session_id = new_session(server, tmp_path)
        prompt(server, session_id, "My name is Ada.")
        shown = prompt(server, session_id, "/compact keep names")
        prompt(server, session_id, "Who am I?")
    summarising, after = model.requests[1].body, model.requests[2].body
    assert messages(summarising) == [
        ("system", SUMMARY_SYSTEM),
        ("user", "My name is Ada."),
        ("assistant", "Hello Ada."),
        (
            "user",
            "Summarise the conversation so far, as the system instruction says.\n\n"
            "The user's instructions for the summary: keep names",
        ),
    ]
    assert "tools" not in summarising
    assert messages(after) == [("user", SUMMARY_PREAMBLE + SUMMARY), ("user", "Who am I?")]
    assert [u["content"]["text"] for u in shown if u["sessionUpdate"] == "agent_message_chunk"] == [
        SUMMARY,
        "The conversation was compacted.",
    ]


def test_the_log_and_session_page_keep_every_event_of_a_compacted_session(
    tmp_path: Path,
) -> None:
    script: list[Response] = [answer("Hello Ada."), answer(SUMMARY), answer("You are Ada.")]
    with FakeOpenAI(script) as model, serve(tmp_path, model) as server:
        session_id = new_session(server, tmp_path)
        for words in ("My name is Ada.", "/compact", "Who am I?"):
            prompt(server, session_id, words)
        events = read_log(tmp_path / "sessions" / session_id / "session.jsonl").events
        address = {"kind": "session", "sessionId": session_id}
        page = server.result(
            "session.page",
            {"address": address, "throughSeq": events[-1].seq, "maxMessages": 100},
        )
    users = [e.data.message.content for e in events if type(e) is UserMessageEvent]
    assert users == [[TextContent(t)] for t in ("My name is Ada.", "/compact", "Who am I?")]
    compactions = [e.data for e in events if type(e) is ContextCompaction]
    first_turn_end = next(e.seq for e in events if type(e) is TurnEnd)
    assert compactions == [ContextCompactionData(1, 0, first_turn_end)]
    paged = [r["event"]["type"] for r in page["records"] if "event" in r]
    assert paged.count("user/message") == 3
    assert "context/compaction" in paged


def test_a_load_in_a_fresh_process_marks_the_compaction(tmp_path: Path) -> None:
    script: list[Response] = [answer("Hello Ada."), answer(SUMMARY)]
    with FakeOpenAI(script) as model:
        with serve(tmp_path, model) as server:
            session_id = new_session(server, tmp_path)
            prompt(server, session_id, "My name is Ada.")
            prompt(server, session_id, "/compact")
        with serve(tmp_path, model) as server:
            server.initialize()
            params = {"sessionId": session_id, "cwd": str(tmp_path), "mcpServers": []}
            _, before = server.exchange("session/load", params)
    texts = [
        (f["params"]["update"]["sessionUpdate"], f["params"]["update"]["content"]["text"])
        for f in before
        if f.get("method") == "session/update" and "content" in f["params"]["update"]
    ]
    assert texts == [
        ("user_message_chunk", "My name is Ada."),
        ("agent_message_chunk", "Hello Ada."),
        ("user_message_chunk", "/compact"),
        ("agent_message_chunk", COMPACTED_NOTICE + SUMMARY),
        ("agent_message_chunk", "The conversation was compacted."),
    ]


def test_past_compact_at_the_next_model_call_compacts_first(tmp_path: Path) -> None:
    script: list[Response] = [
        answer("Hello Ada.", prompt_tokens=600),
        answer(SUMMARY),
        answer("You are Ada."),
    ]
    flags = ("--context-window", "1000", "--compact-at", "0.6")
    with FakeOpenAI(script) as model, serve(tmp_path, model, *flags) as server:
        session_id = new_session(server, tmp_path)
        prompt(server, session_id, "My name is Ada.")
        prompt(server, session_id, "Who am I?")
    assert len(model.requests) == 3
    assert messages(model.requests[1].body)[0] == ("system", SUMMARY_SYSTEM)
    assert messages(model.requests[2].body) == [
        ("user", SUMMARY_PREAMBLE + SUMMARY),
        ("user", "Who am I?"),
    ]


def test_below_compact_at_nothing_is_compacted(tmp_path: Path) -> None:
    script: list[Response] = [answer("Hello Ada.", prompt_tokens=500), answer("You are Ada.")]
    flags = ("--context-window", "1000", "--compact-at", "0.6")
    with FakeOpenAI(script) as model, serve(tmp_path, model, *flags) as server:
        session_id = new_session(server, tmp_path)
        prompt(server, session_id, "My name is Ada.")
        prompt(server, session_id, "Who am I?")
    assert messages(model.requests[1].body) == [
        ("user", "My name is Ada."),
        ("assistant", "Hello Ada."),
        ("user", "Who am I?"),
    ]


def test_search_history_finds_a_detail_from_before_the_compaction(tmp_path: Path) -> None:
    search = call(0, id="call_s", name="search_history", arguments='{"pattern": "secret \\\\w+"}')
    script: list[Response] = [
        answer("Noted."),
        answer(SUMMARY),
        Sse([search, chunk(finish="tool_calls")]),
        answer("The secret word is plum."),
    ]
    with FakeOpenAI(script) as model, serve(tmp_path, model) as server:
        session_id = new_session(server, tmp_path)
        prompt(server, session_id, "My name is Ada.\nThe secret word is plum.")
        prompt(server, session_id, "/compact")
        shown = prompt(server, session_id, "What was the secret word?")
    assert messages(model.requests[3].body)[:2] == [
        ("user", SUMMARY_PREAMBLE + SUMMARY),
        ("user", "What was the secret word?"),
    ]
    assert model.requests[3].body["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_s",
        # Seq 0 is the `session/context` read before the first turn.
        "content": "[seq 26, turn 2, user] What was the secret word?\n"
        "[seq 2, turn 0, user] The secret word is plum.",
    }
    started = [u for u in shown if u["sessionUpdate"] == "tool_call"]
    assert [(u["kind"], u["title"]) for u in started] == [("search", "Search history: secret \\w+")]


def test_compact_with_nothing_before_it_calls_no_model(tmp_path: Path) -> None:
    with FakeOpenAI([]) as model, serve(tmp_path, model) as server:
        session_id = new_session(server, tmp_path)
        shown = prompt(server, session_id, "/compact")
    assert model.requests == []
    assert [u["content"]["text"] for u in shown] == ["There is no conversation to compact yet."]
    events = read_log(tmp_path / "sessions" / session_id / "session.jsonl").events
    assert [type(e).__name__ for e in events] == [
        "SessionContext",  # what the server's own prompt was made of: read before the turn
        "TurnStart",
        "UserMessageEvent",
        "CommandResult",
        "TurnEnd",
    ]


def test_a_cancelled_compact_ends_as_a_failed_command_and_compacts_nothing(
    tmp_path: Path,
) -> None:
    scenario = Scenario(
        [("hi", [Step(text="Hello.")]), ("/compact", [Step(text="never")])],
        override={"patches": [{"at": 1, "entry": {"kind": "hang", "readyFile": "ready.txt"}}]},
    )
    with PromptServer(tmp_path, scenario) as server:
        session = server.new_session()
        server.prompt(session, "hi")
        request = server.send_request("session/prompt", server.prompt_params(session, "/compact"))
        wait_until((server.workspace / "ready.txt").exists, "the summarising call started")
        server.cancel(session)
        assert server.read_until_response(request).stop_reason == "cancelled"
        tail = server.log(session)[-3:]
    assert tail == [
        {"type": "step/end", "data": {"turn": 1, "step": 0}},
        {
            "type": "command/result",
            "data": {
                "turn": 1,
                "command": "compact",
                "content": [{"type": "text", "text": "The compaction was cancelled."}],
                "isError": True,
            },
        },
        {"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "cancelled"}}},
    ]
