"""`session/fork` through the real server (SPEC 4.7), on each store engine.

A fork is a new session on the connection that asked for it, whose log starts with the
parent's events through the fork point, then `session/forked`. These tests fork over the wire
and read both logs back from the store; a fork at a message is loaded, paged and prompted in a
fresh process. Every frame is checked against the Python SDK's models (`PromptServer`), and the
fork's own frames against the TypeScript SDK 2.4.0's unstable v1 schema, which has `session/fork`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from acp_process import AcpProcess
from fixtures_builder import Scenario, Step, fragments
from polling import wait_until
from prompt_harness import PromptServer
from sdk_schema import check

from acp_server.core.events import AssistantChunk, AssistantMessageEvent, SessionEvent, TurnEnd
from acp_server.core.stream import TextDelta
from acp_server.storage.url import open_store, parse_store_url

pytestmark = pytest.mark.process

FIRST, SECOND = "First answer, in a few words.", "Second answer."
TWO_TURNS = Scenario([("First?", [Step(text=FIRST)]), ("Second?", [Step(text=SECOND)])])


@pytest.fixture(params=["jsonl", "sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite://{tmp_path}/sessions.db"
    if request.param == "postgresql":
        return str(request.getfixturevalue("postgres_url"))
    return str(tmp_path / "sessions")


def stored(url: str, session_id: str) -> list[SessionEvent]:
    async def read() -> list[SessionEvent]:
        store = open_store(parse_store_url(url))
        try:
            return (await store.read(session_id)).events
        finally:
            await store.aclose()

    return anyio.run(read)


def without_times(events: list[SessionEvent]) -> list[dict[str, Any]]:
    """The events as JSON values, times left out (those the fork wrote are its clock's)."""
    values = msgspec.to_builtins(events)
    return [{k: v for k, v in value.items() if k != "time"} for value in values]


def fork_params(server: PromptServer, parent: str, **fork_at: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"sessionId": parent, "cwd": str(server.workspace), "mcpServers": []}
    if fork_at:
        params["_meta"] = {"acp-server": {"forkAt": fork_at}}
    return params


def two_turns(server: PromptServer) -> str:
    parent = server.new_session()
    assert server.prompt(parent, "First?").stop_reason == "end_turn"
    assert server.prompt(parent, "Second?").stop_reason == "end_turn"
    return parent


def messages(updates: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The user and agent message text a replay showed, one entry per update."""
    return [
        (u["sessionUpdate"], u["content"]["text"])
        for u in updates
        if u["sessionUpdate"] in ("user_message_chunk", "agent_message_chunk")
    ]


def test_initialize_advertises_fork(tmp_path: Path) -> None:
    process = AcpProcess(tmp_path / "sessions")
    response, _ = process.exchange("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    assert process.finish() == 0
    check("InitializeResponse", response["result"])
    assert response["result"]["agentCapabilities"]["sessionCapabilities"]["fork"] == {}


def test_a_fork_at_a_message_loads_pages_and_continues_in_a_fresh_process(
    tmp_path: Path, store_url: str
) -> None:
    with PromptServer(tmp_path, TWO_TURNS, store=store_url) as first:
        parent = two_turns(first)
        forked = first.request(
            "session/fork", fork_params(first, parent, messageId="assistant-0-0")
        )
    check("ForkSessionResponse", forked.result)
    fork = forked.result["sessionId"]
    parent_log, fork_log = stored(store_url, parent), stored(store_url, fork)
    through = next(e.seq for e in parent_log if type(e) is AssistantMessageEvent)
    assert forked.result["_meta"] == {"acp-server": {"throughSeq": through}}
    assert fork_log[: through + 1] == parent_log[: through + 1]
    assert without_times(fork_log[through + 1 :]) == [
        {
            "type": "session/forked",
            "seq": through + 1,
            "data": {"fromSessionId": parent, "throughSeq": through},
        },
        {"type": "step/end", "seq": through + 2, "data": {"turn": 0, "step": 0}},
        {
            "type": "turn/end",
            "seq": through + 3,
            "data": {"turn": 0, "reason": {"kind": "interrupted"}},
        },
    ]

    with PromptServer(tmp_path, TWO_TURNS, store=store_url) as second:
        loaded = second.request(
            "session/load", {"sessionId": fork, "cwd": str(second.workspace), "mcpServers": []}
        )
        address = {"kind": "session", "sessionId": fork}
        page = second.request("session.page", {"address": address, "throughSeq": through + 3})
        answered = second.prompt(fork, "Second?")
    assert messages(loaded.updates) == [
        ("user_message_chunk", "First?"),
        ("agent_message_chunk", FIRST),
    ]
    assert {"event": msgspec.to_builtins(fork_log[through + 1])} in page.result["records"]
    # llm-replay goes on after the one model call the fork holds: the recording's second.
    assert (answered.stop_reason, answered.text()) == ("end_turn", SECOND)
    assert stored(store_url, parent) == parent_log  # the parent is left as it was


def test_a_fork_is_followed_as_any_session(tmp_path: Path) -> None:
    with PromptServer(tmp_path, TWO_TURNS) as server:
        parent = two_turns(server)
        forked = server.request("session/fork", fork_params(server, parent, messageId="user-1"))
        fork = forked.result["sessionId"]
        through = forked.result["_meta"]["acp-server"]["throughSeq"]
        address = {"kind": "session", "sessionId": fork}
        followed = server.request("session.follow", {"address": address})
        answered = server.prompt(fork, "Second?")
    # Cut through turn 1's prompt: session/forked, then its closing turn/end.
    assert followed.result["cursor"] == through + 2
    events = [r["params"]["event"] for r in answered.requests if r["method"] == "session.event"]
    assert [(e["seq"], e["type"]) for e in events[:2]] == [
        (through + 3, "turn/start"),
        (through + 4, "user/message"),
    ]
    assert events[0]["data"] == {"turn": 2}


def test_a_step_cut_mid_stream_replays_what_its_chunks_had_streamed(tmp_path: Path) -> None:
    with PromptServer(tmp_path, TWO_TURNS) as server:
        parent = two_turns(server)
        deltas = [
            e.seq
            for e in stored(str(server.sessions_dir), parent)
            if type(e) is AssistantChunk and type(e.data.chunk) is TextDelta
        ]
        forked = server.request("session/fork", fork_params(server, parent, seq=deltas[1]))
        fork = forked.result["sessionId"]
        loaded = server.request(
            "session/load", {"sessionId": fork, "cwd": str(server.workspace), "mcpServers": []}
        )
    assert messages(loaded.updates) == [
        ("user_message_chunk", "First?"),
        ("agent_message_chunk", "".join(fragments(FIRST)[:2])),
    ]


def test_by_default_a_fork_holds_every_event_of_an_idle_session(tmp_path: Path) -> None:
    with PromptServer(tmp_path, TWO_TURNS) as server:
        parent = two_turns(server)
        forked = server.request("session/fork", fork_params(server, parent))
    parent_log = stored(str(server.sessions_dir), parent)
    fork_log = stored(str(server.sessions_dir), forked.result["sessionId"])
    assert forked.result["_meta"] == {"acp-server": {"throughSeq": len(parent_log) - 1}}
    assert fork_log[:-1] == parent_log
    assert without_times(fork_log[-1:]) == [
        {
            "type": "session/forked",
            "seq": len(parent_log),
            "data": {"fromSessionId": parent, "throughSeq": len(parent_log) - 1},
        }
    ]


def test_a_fork_of_a_running_session_copies_its_completed_turns_without_waiting(
    tmp_path: Path,
) -> None:
    hanging = Scenario(
        TWO_TURNS.turns,
        override={"patches": [{"at": 1, "entry": {"kind": "hang", "readyFile": "ready.txt"}}]},
    )
    with PromptServer(tmp_path, hanging) as server:
        parent = server.new_session()
        server.prompt(parent, "First?")
        running = server.send_request("session/prompt", server.prompt_params(parent, "Second?"))
        wait_until(lambda: (server.workspace / "ready.txt").exists(), "the model hangs")
        forked = server.read_until_response(
            server.send_request("session/fork", fork_params(server, parent))
        )
        server.cancel(parent)
        assert server.read_until_response(running).stop_reason == "cancelled"
    parent_log = stored(str(server.sessions_dir), parent)
    first_end = next(e.seq for e in parent_log if type(e) is TurnEnd)
    fork_log = stored(str(server.sessions_dir), forked.result["sessionId"])
    assert forked.result["_meta"] == {"acp-server": {"throughSeq": first_end}}
    assert fork_log[:-1] == parent_log[: first_end + 1]
    assert [e.seq for e in fork_log] == list(range(first_end + 2))


def test_a_fork_goes_on_in_the_mode_its_parent_had_at_the_fork_point(tmp_path: Path) -> None:
    with PromptServer(tmp_path, TWO_TURNS) as server:
        parent = server.new_session()
        server.request("session/set_mode", {"sessionId": parent, "modeId": "plan"})
        forked = server.request("session/fork", fork_params(server, parent))
    assert forked.result["modes"]["currentModeId"] == "plan"


def test_a_fork_s_header_has_the_request_s_own_directories(tmp_path: Path) -> None:
    extra = str(tmp_path / "extra")
    with PromptServer(tmp_path, TWO_TURNS) as server:
        parent = server.new_session()
        params = {**fork_params(server, parent), "additionalDirectories": [extra]}
        fork = server.request("session/fork", params).result["sessionId"]

    async def header() -> Any:
        store = open_store(parse_store_url(str(server.sessions_dir)))
        try:
            return await store.header(fork)
        finally:
            await store.aclose()

    stored_header = anyio.run(header)
    assert (stored_header.cwd, stored_header.additional_directories) == (
        str(server.workspace),
        [extra],
    )
    assert stored_header.mcp_servers == []


def test_a_fork_of_an_unknown_session_is_resource_not_found(tmp_path: Path) -> None:
    with PromptServer(tmp_path, TWO_TURNS) as server:
        refused = server.request("session/fork", fork_params(server, "nobody"))
    assert refused.error["code"] == -32002


def test_a_fork_at_an_unknown_message_is_invalid_params_naming_it(tmp_path: Path) -> None:
    with PromptServer(tmp_path, TWO_TURNS) as server:
        parent = two_turns(server)
        refused = server.request("session/fork", fork_params(server, parent, messageId="m-9"))
    path = '$._meta["acp-server"].forkAt.messageId'
    assert refused.error == {
        "code": -32602,
        "message": f"Invalid params: the session has no message 'm-9' - at `{path}`",
        "data": {"path": path},
    }


def test_a_fork_at_both_a_seq_and_a_message_is_invalid_params(tmp_path: Path) -> None:
    with PromptServer(tmp_path, TWO_TURNS) as server:
        parent = server.new_session()
        refused = server.request(
            "session/fork", fork_params(server, parent, seq=0, messageId="user-0")
        )
    path = '$._meta["acp-server"].forkAt'
    assert refused.error == {
        "code": -32602,
        "message": f"Invalid params: must hold exactly one of `seq` and `messageId` - at `{path}`",
        "data": {"path": path},
    }
