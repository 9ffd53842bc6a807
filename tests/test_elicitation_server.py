"""Elicitation through the real server: the model's `ask_user` and an MCP server's own
questions, to a client that shows forms (`elicitation.form`) and to one that does not.

Each `elicitation/create` the server sends is held to the TypeScript SDK 2.4.0's schema (and to
the Python SDK's models when the server closes, as every frame of `PromptServer`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp_process import AcpProcess
from fixtures_builder import Scenario, Step, ToolUse, args
from mcp_support import stdio_server
from openai_server import FakeOpenAI, Sse, chunk, text
from prompt_harness import FakeClient, PromptServer
from sdk_schema import validator

pytestmark = pytest.mark.process

FORMS = {"elicitation": {"form": {}}}
SLOW = 120.0
"""Seconds a Python MCP server may take to start (see test_mcp_tools)."""

FORM = {
    "type": "object",
    "properties": {"color": {"type": "string", "enum": ["red", "blue"]}},
    "required": ["color"],
}
ASK = Scenario(
    [
        (
            "paint it",
            [
                Step(
                    calls=[ToolUse("c1", "ask_user", args(message="Which?", requestedSchema=FORM))]
                ),
                Step(text="Done."),
            ],
        )
    ]
)


class FormClient(FakeClient):
    """A `FakeClient` that answers each `elicitation/create` with the next of `answers`."""

    def __init__(self, *answers: dict[str, Any], permissions: list[str] | None = None) -> None:
        super().__init__(permissions=list(permissions or []))
        self.answers = list(answers)

    def answer(self, frame: dict[str, Any]) -> Any:
        if frame["method"] == "elicitation/create":
            self.requests.append({"method": frame["method"], "params": frame["params"]})
            validator("CreateElicitationRequest").validate(frame["params"])
            return self.answers.pop(0)
        return super().answer(frame)


def results(server: PromptServer, session_id: str) -> list[dict[str, Any]]:
    return [e["data"] for e in server.log(session_id) if e["type"] == "tool/result"]


def elicitations(client: FakeClient) -> list[Any]:
    return [r["params"] for r in client.requests if r["method"] == "elicitation/create"]


def test_ask_user_asks_the_client_and_the_answer_is_the_logged_result(tmp_path: Path) -> None:
    client = FormClient({"action": "accept", "content": {"color": "blue"}})
    with PromptServer(tmp_path, ASK, capabilities=FORMS, client=client) as server:
        session_id = server.new_session()
        assert server.prompt(session_id, "paint it").stop_reason == "end_turn"
        assert elicitations(client) == [
            {
                "sessionId": session_id,
                "toolCallId": "c1",
                "message": "Which?",
                "mode": "form",
                "requestedSchema": FORM,
            }
        ]
        assert results(server, session_id) == [
            {
                "turn": 0,
                "step": 0,
                "callId": "c1",
                "content": [{"type": "text", "text": 'The user answered: {"color":"blue"}'}],
                "rawOutput": {"action": "accept", "content": {"color": "blue"}},
            }
        ]


def test_a_declined_question_is_the_logged_result(tmp_path: Path) -> None:
    client = FormClient({"action": "decline"})
    with PromptServer(tmp_path, ASK, capabilities=FORMS, client=client) as server:
        session_id = server.new_session()
        server.prompt(session_id, "paint it")
        assert [r["content"] for r in results(server, session_id)] == [
            [{"type": "text", "text": "The user declined to answer."}]
        ]


def test_a_client_without_forms_is_not_offered_ask_user_nor_sent_a_form(tmp_path: Path) -> None:
    client = FormClient()
    with PromptServer(tmp_path, ASK, client=client) as server:
        session_id = server.new_session()
        server.prompt(session_id, "paint it")
        assert elicitations(client) == []
        [result] = results(server, session_id)
        assert result["isError"] is True
        assert result["content"][0]["text"].startswith("unknown tool 'ask_user'; the tools are: ")


def greet() -> Scenario:
    call = ToolUse("c1", "mcp__demo__greet", "{}")
    return Scenario([("greet me", [Step(calls=[call]), Step(text="Done.")])])


def test_an_mcp_servers_question_reaches_the_client_and_its_answer_the_server(
    tmp_path: Path,
) -> None:
    client = FormClient(
        {"action": "accept", "content": {"name": "Ada", "formal": True}},
        permissions=["allow_once"],
    )
    with PromptServer(
        tmp_path, greet(), "--mcp-connect-timeout", str(SLOW), capabilities=FORMS, client=client
    ) as server:
        session_id = server.new_session([stdio_server()], timeout=SLOW)
        assert server.prompt(session_id, "greet me", timeout=SLOW).stop_reason == "end_turn"
        assert elicitations(client) == [
            {
                "sessionId": session_id,
                "toolCallId": "c1",
                "message": "What is your name?",
                "mode": "form",
                "requestedSchema": {
                    "type": "object",
                    "title": "Name",
                    "properties": {
                        "name": {"type": "string", "title": "Name", "description": "Your name"},
                        "formal": {
                            "type": "boolean",
                            "title": "Formal",
                            "description": "Say it formally",
                        },
                    },
                    "required": ["name"],
                },
            }
        ]
        assert [r["content"] for r in results(server, session_id)] == [
            [{"type": "text", "text": "Good day, Ada!"}]
        ]


def test_an_mcp_servers_question_is_declined_for_a_client_without_forms(tmp_path: Path) -> None:
    client = FormClient(permissions=["allow_once"])
    with PromptServer(
        tmp_path, greet(), "--mcp-connect-timeout", str(SLOW), client=client
    ) as server:
        session_id = server.new_session([stdio_server()], timeout=SLOW)
        server.prompt(session_id, "greet me", timeout=SLOW)
        assert elicitations(client) == []
        assert [r["content"] for r in results(server, session_id)] == [
            [{"type": "text", "text": "declined"}]
        ]


@pytest.mark.parametrize(("capabilities", "offered"), [(FORMS, True), ({}, False)])
def test_ask_user_is_offered_to_the_model_only_when_the_client_shows_forms(
    tmp_path: Path, capabilities: dict[str, Any], offered: bool
) -> None:
    hi = Sse([chunk(text("Hi.")), chunk(finish="stop")])
    sessions = tmp_path / "sessions"
    flags = ("--provider", "openai", "--model", "gpt-4o", "--titles", "off")
    with (
        FakeOpenAI([hi]) as model,
        AcpProcess(sessions, *flags, "--base-url", model.base_url) as server,
    ):
        server.result("initialize", {"protocolVersion": 1, "clientCapabilities": capabilities})
        created = server.result("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        server.exchange(
            "session/prompt",
            {"sessionId": created["sessionId"], "prompt": [{"type": "text", "text": "hi"}]},
        )
    names = [tool["function"]["name"] for tool in model.requests[0].body["tools"]]
    assert ("ask_user" in names, names[-1] == "ask_user") == (offered, offered)


def test_cancelling_the_turn_withdraws_an_mcp_servers_unanswered_question(tmp_path: Path) -> None:
    client = FormClient(permissions=["allow_once"])
    with PromptServer(
        tmp_path, greet(), "--mcp-connect-timeout", str(SLOW), capabilities=FORMS, client=client
    ) as server:
        session_id = server.new_session([stdio_server()], timeout=SLOW)
        prompt = server.send_request("session/prompt", server.prompt_params(session_id, "greet me"))
        while True:
            frame = server.process.read_frame(SLOW)
            if frame.get("method") == "elicitation/create":
                break
            if frame.get("method") == "session/request_permission":
                server.reply(frame["id"], client.answer(frame))
        server.cancel(session_id)
        answered = server.read_until_response(prompt, answer=False)
        assert answered.stop_reason == "cancelled"
        assert answered.requests == [
            {"method": "$/cancel_request", "params": {"requestId": frame["id"]}}
        ]
        [result] = results(server, session_id)
        assert result["content"] == [{"type": "text", "text": "cancelled"}]
