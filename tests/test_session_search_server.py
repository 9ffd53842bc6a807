"""`session.search` (SPEC 3.5) through the real server, on each store engine: hits newest
first with their seq, kind and snippet, paged with `beforeSeq`, text or RE2 patterns, a
session live in the server or only stored, and a search over its time bound refused with
-32602 naming `query`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from acp_process import AcpProcess
from fixtures_builder import Scenario, Step, write_fixture

from acp_server.core.content import TextContent
from acp_server.core.events import (
    AssistantMessage,
    AssistantMessageData,
    AssistantMessageEvent,
    SessionEvent,
    SubagentStart,
    SubagentStartData,
    ToolResult,
    ToolResultData,
    TurnStart,
    TurnStartData,
    UserMessage,
    UserMessageData,
    UserMessageEvent,
)
from acp_server.core.header import SESSION_FORMAT_VERSION, SessionHeader
from acp_server.core.stream import AssistantReasoning, AssistantText
from acp_server.storage.url import open_store, parse_store_url

pytestmark = pytest.mark.process

T0 = 1_760_000_000_000
SESSION = "searched"
LONG = "a" * 5000 + "b"


def events() -> list[SessionEvent]:
    """Seq 0: turn start; 1: user; 2: assistant (thought and text); 3: tool result; 4: user;
    5: assistant whose text is one long line of `a`s."""
    made: list[SessionEvent] = [
        TurnStart(0, T0, TurnStartData(0)),
        UserMessageEvent(
            1, T0, UserMessageData(0, UserMessage("u0", [TextContent("Where is the Config?")]))
        ),
        AssistantMessageEvent(
            2,
            T0,
            AssistantMessageData(
                0,
                0,
                AssistantMessage(
                    "a0",
                    [AssistantReasoning("look for config.toml"), AssistantText("Reading it.")],
                ),
            ),
        ),
        ToolResult(3, T0, ToolResultData(0, 0, "call_0", [TextContent("[server]\nport = 8123")])),
        UserMessageEvent(4, T0, UserMessageData(0, UserMessage("u1", [TextContent("port?")]))),
        AssistantMessageEvent(
            5, T0, AssistantMessageData(0, 1, AssistantMessage("a1", [AssistantText(LONG)]))
        ),
    ]
    return made


@pytest.fixture(params=["jsonl", "sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        url = f"sqlite://{tmp_path}/sessions.db"
    elif request.param == "postgresql":
        url = str(request.getfixturevalue("postgres_url"))
    else:
        url = str(tmp_path / "sessions")
    store_session(url, SESSION, events())
    return url


def store_session(url: str, session_id: str, stored: list[SessionEvent], **fields: Any) -> None:
    async def write() -> None:
        store = open_store(parse_store_url(url))
        try:
            await store.prepare()
            header = SessionHeader(
                version=SESSION_FORMAT_VERSION, id=session_id, created_at=T0, cwd="/work", **fields
            )
            writer = await store.create(header)
            writer.append(stored)
            await writer.close()
        finally:
            await store.aclose()

    anyio.run(write)


def address(session_id: str = SESSION) -> dict[str, str]:
    return {"kind": "session", "sessionId": session_id}


def search(server: AcpProcess, query: str, **params: Any) -> Any:
    return server.result("session.search", {"address": address(), "query": query, **params})


def test_hits_are_newest_first_with_seq_kind_and_snippet(store_url: str) -> None:
    with AcpProcess(None, "--store", store_url) as server:
        server.initialize()
        config = search(server, "config")
        port = search(server, "PORT")
        assert server.finish() == 0
    assert config == {
        "hits": [
            {"seq": 2, "kind": "agent_thought", "snippet": "look for config.toml"},
            {"seq": 1, "kind": "user_message", "snippet": "Where is the Config?"},
        ],
        "hasMore": False,
    }
    assert port["hits"] == [
        {"seq": 4, "kind": "user_message", "snippet": "port?"},
        {"seq": 3, "kind": "tool_result", "snippet": "port = 8123"},
    ]


def test_pages_follow_each_other_through_before_seq(store_url: str) -> None:
    with AcpProcess(None, "--store", store_url) as server:
        server.initialize()
        first = search(server, "o", limit=2)
        second = search(server, "o", limit=2, beforeSeq=first["hits"][-1]["seq"])
        assert server.finish() == 0
    assert [h["seq"] for h in first["hits"]] == [4, 3]
    assert first["hasMore"] is True
    assert [h["seq"] for h in second["hits"]] == [2, 1]
    assert second["hasMore"] is False


@pytest.mark.parametrize("engine", ["jsonl"])
def test_a_regex_query_is_re2_and_a_text_query_is_literal(tmp_path: Path, engine: str) -> None:
    url = str(tmp_path / engine)
    store_session(url, SESSION, events())
    with AcpProcess(None, "--store", url) as server:
        server.initialize()
        regex = search(server, r"port = \d+$", regex=True)
        literal = search(server, r"port = \d+$")
        cased = search(server, "config", regex=True)
        # Exponential for a backtracking engine; linear for RE2.
        catastrophic = search(server, "(a+)+$", regex=True)
        assert server.finish() == 0
    assert regex["hits"] == [{"seq": 3, "kind": "tool_result", "snippet": "port = 8123"}]
    assert literal["hits"] == []
    assert [h["seq"] for h in cased["hits"]] == [2]  # a pattern is case-sensitive
    assert catastrophic == {"hits": [], "hasMore": False}


def test_a_long_line_is_quoted_around_its_match(tmp_path: Path) -> None:
    url = str(tmp_path / "sessions")
    store_session(url, SESSION, events())
    with AcpProcess(None, "--store", url) as server:
        server.initialize()
        found = search(server, "ab")
        assert server.finish() == 0
    assert found["hits"] == [{"seq": 5, "kind": "agent_message", "snippet": "…" + "a" * 159 + "b"}]


def test_a_search_over_its_time_bound_is_invalid_params_naming_query(tmp_path: Path) -> None:
    url = str(tmp_path / "sessions")
    store_session(url, SESSION, events())
    with AcpProcess(None, "--store", url, env={"ACP_SERVER_SEARCH_SECONDS": "0"}) as server:
        server.initialize()
        error = server.error("session.search", {"address": address(), "query": "port"})
        assert server.finish() == 0
    assert error == {
        "code": -32602,
        "message": "Invalid params: the search could not finish within 0 s; a more specific "
        "query, or an earlier beforeSeq, searches less - at `$.query`",
        "data": {"path": "$.query"},
    }


@pytest.mark.parametrize(
    ("params", "path"),
    [
        ({"query": ""}, "$.query"),
        ({"query": "(", "regex": True}, "$.query"),
        ({"query": "(?<=a)b", "regex": True}, "$.query"),
        ({"query": "x", "limit": 0}, "$.limit"),
        ({"query": "x", "limit": 201}, "$.limit"),
        ({"query": "x", "beforeSeq": -1}, "$.beforeSeq"),
        ({"query": "x", "regex": "yes"}, "$.regex"),
    ],
)
def test_malformed_params_are_invalid_params_naming_the_field(
    tmp_path: Path, params: dict[str, Any], path: str
) -> None:
    url = str(tmp_path / "sessions")
    store_session(url, SESSION, events())
    with AcpProcess(None, "--store", url) as server:
        server.initialize()
        error = server.error("session.search", {"address": address(), **params})
        assert server.finish() == 0
    assert error["code"] == -32602
    assert error["data"]["path"] == path


def test_a_subagents_child_is_searched_through_its_parent(tmp_path: Path) -> None:
    url = str(tmp_path / "sessions")
    start = SubagentStartData(0, 0, "call_task", "child", "one-shot")
    store_session(url, "parent", [SubagentStart(0, T0, start)])
    store_session(url, "child", events(), origin="subagent", parent_session="parent")
    through = {"kind": "subagent", "parentSessionId": "parent", "childSessionId": "child"}
    with AcpProcess(None, "--store", url) as server:
        server.initialize()
        found = server.result("session.search", {"address": through, "query": "8123"})
        refused = server.error("session.search", {"address": address("child"), "query": "8123"})
        assert server.finish() == 0
    assert found == {
        "hits": [{"seq": 3, "kind": "tool_result", "snippet": "port = 8123"}],
        "hasMore": False,
    }
    assert (refused["code"], refused["data"]) == (-32602, {"path": "$.address", "check": "origin"})


def test_an_unknown_session_is_32002(tmp_path: Path) -> None:
    with AcpProcess(tmp_path / "sessions") as server:
        server.initialize()
        error = server.error("session.search", {"address": address("nothing"), "query": "x"})
        assert server.finish() == 0
    assert error["code"] == -32002


def test_a_session_live_in_the_server_is_searched_as_it_runs(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    scenario = Scenario(
        [("first question", [Step(text="An answer.")]), ("second", [Step(text="More answer.")])]
    )
    fixture = write_fixture(tmp_path / "fixture", scenario)
    with AcpProcess(tmp_path / "sessions", "--replay", str(fixture)) as server:
        server.initialize()
        new = server.result("session/new", {"cwd": str(workspace), "mcpServers": []})
        session_id = new["sessionId"]
        for text in ("first question", "second"):
            prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
            request_id = server.send_request("session/prompt", prompt)
            while "method" in (frame := server.read_frame()) or frame.get("id") != request_id:
                pass
        found = server.result(
            "session.search",
            {"address": address(session_id), "query": "answer|question", "regex": True},
        )
        assert server.finish() == 0
    assert [(h["kind"], h["snippet"]) for h in found["hits"]] == [
        ("agent_message", "More answer."),
        ("agent_message", "An answer."),
        ("user_message", "first question"),
    ]
