"""The client's system prompt through the real server (ACP `systemPrompt` on `session/new`,
`session/load`, `session/resume` and `session/fork`; SPEC 1.2 `session/context`).

The model is a fake OpenAI endpoint, so each test reads the system message the server really
sent; the log is read back as the store wrote it. The server's own prompt (its fixed text and
the session's context, `test_project_instructions_server`) comes first; a client's `append`
prompt follows it, an `override` replaces it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp_process import AcpProcess
from openai_server import FakeOpenAI, Sse, chunk, text
from sdk_schema import validator

from acp_server.core.events import SessionForked
from acp_server.storage.jsonl.log import read_log

pytestmark = pytest.mark.process

HI = Sse([chunk(text("Hi.")), chunk(finish="stop")])


def openai_flags(model: FakeOpenAI) -> tuple[str, ...]:
    """Titles off: a title's call has its own instructions, and these tests count requests."""
    return (
        "--provider", "openai", "--model", "gpt-4o", "--base-url", model.base_url,
        "--titles", "off",
    )  # fmt: skip


def system_prompt(mode: str, text_: str) -> dict[str, Any]:
    return {"mode": mode, "content": [{"type": "text", "text": text_}]}


def prompt(server: AcpProcess, session_id: str) -> None:
    response, _ = server.exchange(
        "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]}
    )
    assert response["result"] == {"stopReason": "end_turn"}


OWN_START = "You are acp-server's coding agent"
"""How the server's own system prompt begins."""


def system_sent(request: Any) -> Any:
    """The system message of a chat completions request, or None."""
    messages = request.body["messages"]
    return messages[0]["content"] if messages[0]["role"] == "system" else None


def client_part(request: Any) -> tuple[bool, str | None]:
    """Whether the request's system message holds the server's own prompt, and the client's
    prompt after it or in its place (the server's own ends with a line break, and an appended
    prompt follows a blank line)."""
    sent = system_sent(request)
    if sent is None or not sent.startswith(OWN_START):
        return False, sent
    _, _, client = sent.partition("\n\n\n")
    return True, client or None


def contexts(sessions: Path, session_id: str) -> list[tuple[int, dict[str, Any]]]:
    """(seq, data) of every `session/context` event of the session's log."""
    import msgspec

    events = read_log(sessions / session_id / "session.jsonl").events
    values = [msgspec.to_builtins(e) for e in events]
    found = [(v["seq"], v["data"]) for v in values if v["type"] == "session/context"]
    for _, data in found:  # the server's own prompt's settings: test_project_instructions_server
        assert data.pop("settings")["prompt"] == "acp-server:default"
    return found


def test_initialize_advertises_system_prompts_in_both_modes(tmp_path: Path) -> None:
    with AcpProcess(tmp_path / "sessions") as server:
        result = server.initialize()
    validator("InitializeResponse").validate(result)
    assert result["agentCapabilities"]["sessionCapabilities"]["systemPrompt"] == {
        "mode": {"override": {}}
    }


def test_a_new_sessions_system_prompt_is_logged_and_sent_with_every_model_request(
    tmp_path: Path,
) -> None:
    sessions = tmp_path / "sessions"
    with FakeOpenAI([HI, HI]) as model, AcpProcess(sessions, *openai_flags(model)) as server:
        server.initialize()
        session_id = server.result(
            "session/new",
            {
                "cwd": str(tmp_path),
                "mcpServers": [],
                "systemPrompt": system_prompt("override", "You are a poet."),
            },
        )["sessionId"]
        prompt(server, session_id)
        prompt(server, session_id)
    assert [client_part(r) for r in model.requests] == [(False, "You are a poet.")] * 2
    assert contexts(sessions, session_id) == [
        (
            0,
            {
                "instructions": [],
                "systemPromptMode": "override",
                "systemPrompt": [{"type": "text", "text": "You are a poet."}],
            },
        )
    ]


def test_without_a_system_prompt_the_servers_own_is_sent_alone(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    with FakeOpenAI([HI]) as model, AcpProcess(sessions, *openai_flags(model)) as server:
        server.initialize()
        created = server.result("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        prompt(server, created["sessionId"])
    assert client_part(model.requests[0]) == (True, None)
    assert contexts(sessions, created["sessionId"]) == [(0, {"instructions": []})]


def test_a_load_in_a_fresh_process_restores_the_system_prompt_from_the_log(
    tmp_path: Path,
) -> None:
    sessions = tmp_path / "sessions"
    with FakeOpenAI([HI]) as model:
        with AcpProcess(sessions, *openai_flags(model)) as server:
            server.initialize()
            session_id = server.result(
                "session/new",
                {
                    "cwd": str(tmp_path),
                    "mcpServers": [],
                    "systemPrompt": system_prompt("append", "Answer in French."),
                },
            )["sessionId"]
        with AcpProcess(sessions, *openai_flags(model)) as server:
            server.initialize()
            loaded = server.result(
                "session/load", {"sessionId": session_id, "cwd": str(tmp_path), "mcpServers": []}
            )
            assert "modes" in loaded
            prompt(server, session_id)
    assert client_part(model.requests[0]) == (True, "Answer in French.")
    assert [seq for seq, _ in contexts(sessions, session_id)] == [0]


def test_a_resume_with_another_system_prompt_logs_it_and_the_next_request_uses_it(
    tmp_path: Path,
) -> None:
    sessions = tmp_path / "sessions"
    with FakeOpenAI([HI, HI]) as model, AcpProcess(sessions, *openai_flags(model)) as server:
        server.initialize()
        params = {"cwd": str(tmp_path), "mcpServers": []}
        first = system_prompt("override", "You are a poet.")
        session_id = server.result("session/new", {**params, "systemPrompt": first})["sessionId"]
        prompt(server, session_id)
        resume = {**params, "sessionId": session_id}
        server.result("session/resume", {**resume, "systemPrompt": first})  # the same
        server.result(
            "session/resume",
            {**resume, "systemPrompt": system_prompt("append", "Be brief.")},
        )
        prompt(server, session_id)
    assert [client_part(r) for r in model.requests] == [
        (False, "You are a poet."),
        (True, "Be brief."),
    ]
    logged = contexts(sessions, session_id)
    assert [(data["systemPromptMode"], data["systemPrompt"][0]["text"]) for _, data in logged] == [
        ("override", "You are a poet."),
        ("append", "Be brief."),
    ]


def test_an_unknown_mode_is_refused_and_creates_no_session(tmp_path: Path) -> None:
    with AcpProcess(tmp_path / "sessions") as server:
        server.initialize()
        error = server.error(
            "session/new",
            {
                "cwd": str(tmp_path),
                "mcpServers": [],
                "systemPrompt": system_prompt("prepend", "x"),
            },
        )
        assert error == {
            "code": -32602,
            "message": "Invalid params: unknown system prompt mode 'prepend'; the modes are: "
            "append, override - at `$.systemPrompt.mode`",
            "data": {"path": "$.systemPrompt.mode"},
        }
        assert server.result("session/list", {}) == {"sessions": []}


def test_session_page_shows_the_session_context_event_in_its_place(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    with FakeOpenAI([HI]) as model, AcpProcess(sessions, *openai_flags(model)) as server:
        server.initialize()
        session_id = server.result(
            "session/new",
            {
                "cwd": str(tmp_path),
                "mcpServers": [],
                "systemPrompt": system_prompt("append", "Answer in French."),
            },
        )["sessionId"]
        prompt(server, session_id)
        last = read_log(sessions / session_id / "session.jsonl").events[-1].seq
        page = server.result(
            "session.page",
            {
                "address": {"kind": "session", "sessionId": session_id},
                "throughSeq": last,
                "maxMessages": 100,
            },
        )
    events = [r["event"] for r in page["records"] if "event" in r]
    assert [e["type"] for e in events[:3]] == ["session/context", "turn/start", "user/message"]
    assert events[0]["data"].pop("settings")["prompt"] == "acp-server:default"
    assert events[0]["data"] == {
        "instructions": [],
        "systemPromptMode": "append",
        "systemPrompt": [{"type": "text", "text": "Answer in French."}],
    }


def fork_of_a_french_session(
    server: AcpProcess, tmp_path: Path, **fork: Any
) -> tuple[str, dict[str, Any]]:
    """A session whose system prompt appends "Answer in French.", prompted once, and the
    params of a `session/fork` of it (with `fork`'s own fields), checked against the schema."""
    params = {"cwd": str(tmp_path), "mcpServers": []}
    french = system_prompt("append", "Answer in French.")
    parent = server.result("session/new", {**params, "systemPrompt": french})["sessionId"]
    prompt(server, parent)
    fork_params = {**params, "sessionId": parent, **fork}
    validator("ForkSessionRequest").validate(fork_params)
    return parent, fork_params


def test_a_fork_with_another_system_prompt_logs_it_after_session_forked_and_uses_it(
    tmp_path: Path,
) -> None:
    sessions = tmp_path / "sessions"
    poet = system_prompt("override", "You are a poet.")
    with FakeOpenAI([HI, HI, HI]) as model, AcpProcess(sessions, *openai_flags(model)) as server:
        server.initialize()
        parent, params = fork_of_a_french_session(server, tmp_path, systemPrompt=poet)
        forked = server.result("session/fork", params)
        validator("ForkSessionResponse").validate(forked)
        prompt(server, forked["sessionId"])
        prompt(server, parent)
    assert [client_part(r) for r in model.requests] == [
        (True, "Answer in French."),
        (False, "You are a poet."),
        (True, "Answer in French."),
    ]
    events = read_log(sessions / forked["sessionId"] / "session.jsonl").events
    forked_seq = next(e.seq for e in events if type(e) is SessionForked)
    assert contexts(sessions, forked["sessionId"]) == [
        (
            0,
            {
                "instructions": [],
                "systemPromptMode": "append",
                "systemPrompt": [{"type": "text", "text": "Answer in French."}],
            },
        ),
        (
            forked_seq + 1,
            {
                "instructions": [],
                "systemPromptMode": "override",
                "systemPrompt": [{"type": "text", "text": "You are a poet."}],
            },
        ),
    ]
    assert [seq for seq, _ in contexts(sessions, parent)] == [0]


def test_a_fork_without_a_system_prompt_keeps_the_one_its_copied_prefix_holds(
    tmp_path: Path,
) -> None:
    sessions = tmp_path / "sessions"
    with FakeOpenAI([HI, HI]) as model, AcpProcess(sessions, *openai_flags(model)) as server:
        server.initialize()
        _, params = fork_of_a_french_session(server, tmp_path)
        fork = server.result("session/fork", params)["sessionId"]
        prompt(server, fork)
    assert [client_part(r) for r in model.requests] == [(True, "Answer in French.")] * 2
    assert [seq for seq, _ in contexts(sessions, fork)] == [0]


def test_a_fork_with_an_unknown_mode_is_refused_and_forks_nothing(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    with FakeOpenAI([HI]) as model, AcpProcess(sessions, *openai_flags(model)) as server:
        server.initialize()
        parent, params = fork_of_a_french_session(
            server, tmp_path, systemPrompt=system_prompt("prepend", "x")
        )
        error = server.error("session/fork", params)
        listed = server.result("session/list", {})
    assert error == {
        "code": -32602,
        "message": "Invalid params: unknown system prompt mode 'prepend'; the modes are: "
        "append, override - at `$.systemPrompt.mode`",
        "data": {"path": "$.systemPrompt.mode"},
    }
    assert [s["sessionId"] for s in listed["sessions"]] == [parent]
