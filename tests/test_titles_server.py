"""Automatic titles (SPEC 4.4) through real processes: llm-replay titles a session by its first
prompt; a live provider (loopback OpenAI-compatible and Anthropic servers) by a short call in
the background, with the session's key and model, its usage kept in the `session/title` event;
the prompt's line when that call fails; a title the session has already is never replaced."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest
from acp_process import AcpProcess
from anthropic_server import FakeAnthropic, reply, text_block
from fixtures_builder import Scenario, Step
from openai_server import FakeOpenAI, Sse, Status, chunk, text, usage
from polling import wait_until
from prompt_harness import PromptServer
from recorded_sessions import clean_env
from shared_sessions import client, log_types, new_session, prompt
from ws_server import listening

from acp_server.core.titles import TITLE_SYSTEM
from acp_server.storage.jsonl.log import read_log

pytestmark = pytest.mark.process

FIRST = "Fix the parser\nIt fails on tabs."
KEY = "sk-title-test-Wn3Xq8Lm2Rv6"


def titles_of(log: list[dict[str, Any]]) -> list[Any]:
    return [e["data"] for e in log if e["type"] == "session/title"]


def info_updates(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [u for u in updates if u["sessionUpdate"] == "session_info_update"]


# ---------------------------------------------------------------------------------------------
# llm-replay: the first prompt's line.

TWO_TURNS = Scenario([(FIRST, [Step(text="Fixed.")]), ("Thanks", [Step(text="Welcome.")])])


def test_llm_replay_titles_a_session_by_its_first_prompt_after_the_first_turn(
    tmp_path: Path,
) -> None:
    with PromptServer(tmp_path, TWO_TURNS, titles=None) as server:
        session = server.new_session()
        first = server.prompt(session, FIRST)
        second = server.prompt(session, "Thanks")
        log = server.log(session)
    assert first.updates[-1] == {"sessionUpdate": "session_info_update", "title": "Fix the parser"}
    assert info_updates(second.updates) == []
    assert titles_of(log) == [{"title": "Fix the parser"}]
    assert [e["type"] for e in log].index("session/title") == [e["type"] for e in log].index(
        "turn/end"
    ) + 1


def test_a_title_typed_before_the_first_turn_wins(tmp_path: Path) -> None:
    with PromptServer(tmp_path, Scenario([(FIRST, [Step(text="Fixed.")])]), titles=None) as server:
        session = server.new_session()
        server.prompt(session, "/title Mine")
        answered = server.prompt(session, FIRST)
        log = server.log(session)
    assert info_updates(answered.updates) == []
    assert titles_of(log) == [{"title": "Mine"}]


def test_titles_off_leaves_the_session_untitled(tmp_path: Path) -> None:
    with PromptServer(tmp_path, TWO_TURNS, titles="off") as server:
        session = server.new_session()
        answered = server.prompt(session, FIRST)
        log = server.log(session)
    assert info_updates(answered.updates) == []
    assert titles_of(log) == []


def test_titles_by_model_are_refused_with_llm_replay(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "acp_server", "--titles", "model", "--sessions-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (
        2,
        "acp-server serve: error: --titles model: --provider llm-replay makes no model call "
        "for a title (its titles are the prompt's: --titles prompt)\n",
    )


# ---------------------------------------------------------------------------------------------
# Live providers: a short call to the model.


def live(tmp_path: Path, provider: str, base_url: str, *flags: str) -> AcpProcess:
    variable = "OPENAI_API_KEY" if provider == "openai" else "ANTHROPIC_API_KEY"
    return AcpProcess(
        tmp_path / "sessions",
        "--provider", provider, "--model", "m", "--base-url", base_url, "--max-retries", "0",
        *flags,
        env=clean_env(**{variable: KEY, "ACP_SERVER_CONFIG_DIR": str(tmp_path / "config")}),
    )  # fmt: skip


def prompt_then_title(server: AcpProcess, cwd: Path) -> tuple[str, dict[str, Any], Any]:
    """A new session's first prompt, its response, then the title update that follows it."""
    server.initialize()
    session = server.result("session/new", {"cwd": str(cwd), "mcpServers": []})["sessionId"]
    prompt = {"sessionId": session, "prompt": [{"type": "text", "text": FIRST}]}
    response, before = server.exchange("session/prompt", prompt)
    assert info_updates([f["params"]["update"] for f in before]) == []  # not before the answer
    update = server.read_frame()
    return session, response, update["params"]


def logged_titles(tmp_path: Path, session: str) -> list[Any]:
    events = read_log(tmp_path / "sessions" / session / "session.jsonl").events
    return titles_of([msgspec.to_builtins(event) for event in events])


def test_an_openai_compatible_session_is_titled_by_the_model_in_the_background(
    tmp_path: Path,
) -> None:
    model = FakeOpenAI(
        [
            Sse([text("Fixed."), chunk(finish="stop")]),
            Sse([text('"Parser tab '), text('fixes."'), chunk(finish="stop"), usage(31, 4)]),
        ]
    )
    with model, live(tmp_path, "openai", model.base_url) as server:
        session, response, update = prompt_then_title(server, tmp_path)
        assert server.finish() == 0
    assert response["result"] == {"stopReason": "end_turn"}
    assert update == {
        "sessionId": session,
        "update": {"sessionUpdate": "session_info_update", "title": "Parser tab fixes"},
    }
    title_request = model.requests[1]
    assert title_request.headers["Authorization"] == f"Bearer {KEY}"
    assert title_request.body == {
        "model": "m",
        "messages": [
            {"role": "system", "content": TITLE_SYSTEM},
            {"role": "user", "content": FIRST},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 64,
    }
    assert logged_titles(tmp_path, session) == [
        {"title": "Parser tab fixes", "usage": {"inputTokens": 31, "outputTokens": 4}}
    ]


def test_an_anthropic_session_is_titled_by_the_model_with_its_own_key(tmp_path: Path) -> None:
    model = FakeAnthropic(
        [Sse(reply(text_block(0, "Fixed."))), Sse(reply(text_block(0, "Parser ", "tabs")))]
    )
    with model, live(tmp_path, "anthropic", model.base_url) as server:
        session, _, update = prompt_then_title(server, tmp_path)
        assert server.finish() == 0
    assert update["update"] == {"sessionUpdate": "session_info_update", "title": "Parser tabs"}
    title_request = model.requests[1]
    assert title_request.headers["x-api-key"] == KEY
    assert "Authorization" not in title_request.headers
    assert title_request.body["system"] == [
        {"type": "text", "text": TITLE_SYSTEM, "cache_control": {"type": "ephemeral"}}
    ]
    assert (title_request.body["model"], title_request.body["max_tokens"]) == ("m", 64)
    [message] = title_request.body["messages"]
    assert (message["role"], message["content"][0]["text"]) == ("user", FIRST)
    [logged] = logged_titles(tmp_path, session)
    assert logged["title"] == "Parser tabs"
    assert set(logged["usage"]) >= {"inputTokens", "outputTokens"}


def test_a_failed_title_call_keeps_the_prompts_line(tmp_path: Path) -> None:
    model = FakeOpenAI(
        [Sse([text("Fixed."), chunk(finish="stop")]), Status(500, {"error": {"message": "no"}})]
    )
    with model, live(tmp_path, "openai", model.base_url) as server:
        session, _, update = prompt_then_title(server, tmp_path)
        assert server.finish() == 0
    assert update["update"] == {"sessionUpdate": "session_info_update", "title": "Fix the parser"}
    assert logged_titles(tmp_path, session) == [{"title": "Fix the parser"}]
    assert len(model.requests) == 2


def test_titles_prompt_makes_no_model_call_on_a_live_provider(tmp_path: Path) -> None:
    model = FakeOpenAI([Sse([text("Fixed."), chunk(finish="stop")])])
    with model, live(tmp_path, "openai", model.base_url, "--titles", "prompt") as server:
        server.initialize()
        session = server.result("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        prompt = {"sessionId": session["sessionId"], "prompt": [{"type": "text", "text": FIRST}]}
        _, before = server.exchange("session/prompt", prompt)
        assert server.finish() == 0
    assert before[-1]["params"]["update"] == {
        "sessionUpdate": "session_info_update",
        "title": "Fix the parser",
    }
    assert len(model.requests) == 1


def test_a_turn_whose_client_went_is_still_titled_and_its_session_then_closed(
    tmp_path: Path,
) -> None:
    """On a server of many connections a turn goes on when its client goes (SPEC 4), and so
    does the title after it: the model's call belongs to the session, not to the connection
    that went, and the session no client holds is closed once it is written."""
    turn_answers = threading.Event()
    model = FakeOpenAI(
        [
            Sse([text("Fixed."), chunk(finish="stop")], gate=turn_answers),
            Sse([text('"Parser tab fixes."'), chunk(finish="stop"), usage(31, 4)]),
        ]
    )
    flags = ("--provider", "openai", "--model", "m", "--base-url", model.base_url)
    with model, listening(tmp_path / "sessions", *flags, "--max-retries", "0") as server:
        a = client(server)
        session_id = new_session(a, tmp_path)
        prompt(a, session_id, FIRST)
        wait_until(lambda: len(model.requests) == 1, "the turn's model call is made")
        a.close()
        turn_answers.set()

        c = client(server)
        wait_until(lambda: "session/title" in log_types(c, session_id), "the session is titled")
        titled = [e["data"] for e in c.events(session_id) if e["type"] == "session/title"]

        with AcpProcess(tmp_path / "sessions") as other:  # closed: another process may take it
            other.initialize()
            resume = {"sessionId": session_id, "cwd": str(tmp_path), "mcpServers": []}
            wait_until(
                lambda: "result" in other.exchange("session/resume", resume)[0],
                "the session is closed, its claim free for another process",
            )
    assert titled == [
        {"title": "Parser tab fixes", "usage": {"inputTokens": 31, "outputTokens": 4}}
    ]
