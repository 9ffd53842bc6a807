"""A tail load through the real server on every engine (SPEC 4.2, 4.6): a session loaded for
its newest messages in a fresh process replays only them, keeps its settings, sends the model
the history from its latest compaction, and pages and searches back to its first event from the
store; a later load without a tail replays every turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp_process import AcpProcess
from openai_server import FakeOpenAI, Response, Sse, chunk, text, usage

from acp_server.core.compaction import SUMMARY_PREAMBLE, SUMMARY_SYSTEM

pytestmark = pytest.mark.process

SUMMARY = "The user is Ada."


@pytest.fixture(params=["jsonl", "sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite://{tmp_path}/sessions.db"
    if request.param == "postgresql":
        return str(request.getfixturevalue("postgres_url"))
    return f"file://{tmp_path}/sessions"


def answer(words: str) -> Sse:
    return Sse([text(words), chunk(finish="stop"), usage(30, 5)])


def serve(url: str, model: FakeOpenAI) -> AcpProcess:
    base = ("--provider", "openai", "--model", "gpt-4o", "--base-url", model.base_url)
    return AcpProcess(None, "--store", url, *base, "--titles", "off")


def prompt(server: AcpProcess, session_id: str, words: str) -> None:
    params = {"sessionId": session_id, "prompt": [{"type": "text", "text": words}]}
    response, _ = server.exchange("session/prompt", params)
    assert response["result"] == {"stopReason": "end_turn"}, response


def messages(body: dict[str, Any]) -> list[tuple[str, Any]]:
    values = [(m["role"], m.get("content")) for m in body["messages"]]
    if values and values[0][0] == "system" and values[0][1] != SUMMARY_SYSTEM:
        return values[1:]
    return values


def user_texts(frames: list[dict[str, Any]]) -> list[str]:
    """The text of every replayed user message chunk."""
    return [
        f["params"]["update"]["content"]["text"]
        for f in frames
        if f.get("method") == "session/update"
        and f["params"]["update"]["sessionUpdate"] == "user_message_chunk"
    ]


def test_a_tail_load_continues_from_the_compaction_and_pages_back_to_the_start(
    url: str, tmp_path: Path
) -> None:
    script: list[Response] = [
        answer("Hello Ada."),
        answer("Noted."),
        answer(SUMMARY),
        answer("Three."),
        answer("Four."),
        answer("You are Ada."),
    ]
    with FakeOpenAI(script) as model:
        with serve(url, model) as server:
            server.initialize()
            created = server.result("session/new", {"cwd": str(tmp_path), "mcpServers": []})
            session_id = created["sessionId"]
            server.result("session/set_mode", {"sessionId": session_id, "modeId": "plan"})
            for words in ("My name is Ada.", "I like tea.", "/compact", "three", "four"):
                prompt(server, session_id, words)
        with serve(url, model) as server:
            server.initialize()
            params = {
                "sessionId": session_id,
                "cwd": str(tmp_path),
                "mcpServers": [],
                "_meta": {"acp-server": {"replay": {"maxMessages": 2}}},
            }
            response, before = server.exchange("session/load", params)
            prompt(server, session_id, "Who am I?")
            address = {"kind": "session", "sessionId": session_id}
            pages: list[list[dict[str, Any]]] = []
            page = server.result("session.page", {"address": address, "maxMessages": 3})
            pages.append(page["records"])
            through = page["throughSeq"]
            while page["hasMore"]:
                first = min(
                    r["event"]["seq"] if "event" in r else r["chunks"]["seq0"]
                    for r in page["records"]
                )
                page = server.result(
                    "session.page",
                    {
                        "address": address,
                        "throughSeq": through,
                        "beforeSeq": first,
                        "maxMessages": 3,
                    },
                )
                pages.append(page["records"])
            found = server.result("session.search", {"address": address, "query": "tea"})
            whole = dict(params)
            del whole["_meta"]
            _, again = server.exchange("session/load", whole)
    result = response["result"]
    assert result["modes"]["currentModeId"] == "plan"
    assert result["_meta"]["acp-server"]["hasMore"] is True
    assert user_texts(before) == ["four"]
    assert user_texts(again) == [
        "My name is Ada.",
        "I like tea.",
        "/compact",
        "three",
        "four",
        "Who am I?",
    ]
    assert messages(model.requests[-1].body) == [
        ("user", SUMMARY_PREAMBLE + SUMMARY),
        ("user", "three"),
        ("assistant", "Three."),
        ("user", "four"),
        ("assistant", "Four."),
        ("user", "Who am I?"),
    ]
    assert [(h["kind"], h["snippet"]) for h in found["hits"]] == [("user_message", "I like tea.")]
    users = [
        r["event"]["data"]["message"]["content"][0]["text"]
        for records in reversed(pages)
        for r in records
        if "event" in r and r["event"]["type"] == "user/message"
    ]
    assert users == ["My name is Ada.", "I like tea.", "/compact", "three", "four", "Who am I?"]
