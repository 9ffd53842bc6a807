"""A retried model request through the real server, as the user sees it (SPEC 4.1): a `notice`
to a client that takes notices (and a `session/notice` in the log), and one warning line on
stderr per retry that says what failed and when it is tried again, without the key or the
server's body. Loopback OpenAI-compatible and Anthropic servers answer an error, then the
answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp_process import AcpProcess
from anthropic_server import FakeAnthropic, error_body, reply, text_block
from openai_server import FakeOpenAI, Sse, Status, chunk, text, usage
from recorded_sessions import clean_env

pytestmark = pytest.mark.process

NOTICES = {"session": {"notices": {}}}
KEY = "sk-test-Vq83Jd02Lk5Mz7Rt1Wx9"
BODY_SECRET = "body-detail-7Gh2"
"""Words only the server's error body holds: they reach the notice, never stderr."""


def prompt_once(server: AcpProcess, cwd: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One session, one prompt: its response, the notices sent before it."""
    server.result("initialize", {"protocolVersion": 1, "clientCapabilities": NOTICES})
    session_id = server.result("session/new", {"cwd": str(cwd), "mcpServers": []})["sessionId"]
    prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "hello"}]}
    response, before = server.exchange("session/prompt", prompt)
    updates = [f["params"]["update"] for f in before if f.get("method") == "session/update"]
    return response, [u for u in updates if u["sessionUpdate"] == "notice"]


def retry_lines(stderr: str) -> list[str]:
    """The retry warnings on stderr, without their time stamp."""
    marker = " WARNING acp_server.providers.http: "
    return [line.split(marker, 1)[1] for line in stderr.splitlines() if marker in line]


def test_an_openai_retry_is_a_notice_and_one_line_on_stderr(tmp_path: Path) -> None:
    overloaded = Status(503, {"error": {"message": BODY_SECRET}}, {"retry-after-ms": "10"})
    answer = Sse([text("Hi."), chunk(finish="stop"), usage(10, 2)])
    with FakeOpenAI([overloaded, answer]) as model:
        # No title call: what stderr holds is the turn's alone.
        flags = (
            "--provider",
            "openai",
            "--model",
            "gpt-4o",
            "--titles",
            "off",
            "--base-url",
            model.base_url,
        )
        with AcpProcess(tmp_path / "sessions", *flags, env=clean_env(OPENAI_API_KEY=KEY)) as server:
            response, notices = prompt_once(server, tmp_path)
            assert server.finish() == 0
            stderr = server.stderr

    url = f"{model.base_url}/chat/completions"
    assert response["result"] == {"stopReason": "end_turn"}
    assert notices == [
        {
            "sessionUpdate": "notice",
            "severity": "warning",
            "title": "Model request failed (503); retrying",
            "description": f"openai: HTTP 503 Service Unavailable from {url}: {BODY_SECRET}. "
            "Attempt 2 of 4 in 0.01 s.",
        }
    ]
    assert retry_lines(stderr) == [
        f"openai: model request failed (HTTP 503 Service Unavailable from {url}); "
        "retry 1 of 3 in 0.01 s"
    ]
    assert (KEY in stderr, BODY_SECRET in stderr) == (False, False)


def test_an_anthropic_retry_is_a_notice_and_one_line_on_stderr(tmp_path: Path) -> None:
    overloaded = Status(529, error_body("overloaded_error", BODY_SECRET), {"retry-after-ms": "10"})
    answer = Sse(reply(text_block(0, "Hi.")))
    with FakeAnthropic([overloaded, answer]) as model:
        # No title call: what stderr holds is the turn's alone.
        flags = (
            "--provider",
            "anthropic",
            "--model",
            "claude-test",
            "--titles",
            "off",
            "--base-url",
            model.base_url,
        )
        with AcpProcess(
            tmp_path / "sessions", *flags, env=clean_env(ANTHROPIC_API_KEY=KEY)
        ) as server:
            response, notices = prompt_once(server, tmp_path)
            assert server.finish() == 0
            stderr = server.stderr

    url = f"{model.base_url}/v1/messages"
    assert response["result"] == {"stopReason": "end_turn"}
    assert [(n["title"], n["description"]) for n in notices] == [
        (
            "Model request failed (529); retrying",
            f"anthropic: HTTP 529 error from {url}: {BODY_SECRET}. Attempt 2 of 4 in 0.01 s.",
        )
    ]
    assert retry_lines(stderr) == [
        f"anthropic: model request failed (HTTP 529 error from {url}); retry 1 of 3 in 0.01 s"
    ]
    assert (KEY in stderr, BODY_SECRET in stderr) == (False, False)
