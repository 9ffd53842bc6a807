"""`ask_user` and the forms of elicitation (`acp_server.agent.tools.elicitation`), with an
in-memory client: what is sent, what is refused before sending, and the result each answer
gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from acp_server.agent.ports import ClientCapabilities
from acp_server.agent.tools import ToolContext, ToolOutcome, ToolRegistry, run_tool
from acp_server.agent.tools.elicitation import ASK_USER, FormRefused, form_from_mcp
from acp_server.core.content import TextContent

FORM = {
    "type": "object",
    "properties": {
        "color": {"type": "string", "title": "Color", "enum": ["red", "blue"]},
        "count": {"type": "integer", "minimum": 1, "maximum": 3},
        "size": {"type": "number", "description": "In metres"},
        "urgent": {"type": "boolean"},
    },
    "required": ["color"],
}


class FormClient:
    """A client that shows forms and answers each with the next of `answers`."""

    def __init__(self, *answers: Any, forms: bool = True) -> None:
        self.capabilities = ClientCapabilities(elicitation_form=forms)
        self.answers = list(answers)
        self.requests: list[tuple[str, Any]] = []

    async def request(self, method: str, params: Any) -> Any:
        self.requests.append((method, params))
        return self.answers.pop(0)

    async def notify(self, method: str, params: Any) -> None:
        raise AssertionError(f"unexpected notification {method}")

    async def notify_all(self, method: str, params: Any) -> None:
        raise AssertionError(f"unexpected notification {method}")


async def started(content: Any = None) -> None:
    pass


async def ask(client: FormClient, arguments: Any) -> ToolOutcome:
    ctx = ToolContext("sess-1", Path("/"), [], client)
    return await run_tool(
        ToolRegistry([ASK_USER]),
        ctx,
        "call-1",
        "ask_user",
        msgspec.json.encode(arguments).decode(),
        title="Ask",
        kind="other",
        on_started=started,
    )


@pytest.mark.anyio
async def test_ask_user_sends_the_form_as_an_elicitation_of_its_call() -> None:
    client = FormClient({"action": "accept", "content": {"color": "red", "count": 2}})
    await ask(client, {"message": "Which color?", "requestedSchema": FORM})
    assert client.requests == [
        (
            "elicitation/create",
            {
                "sessionId": "sess-1",
                "toolCallId": "call-1",
                "message": "Which color?",
                "mode": "form",
                "requestedSchema": FORM,
            },
        )
    ]


@pytest.mark.anyio
async def test_an_accepted_form_is_the_result_with_its_content() -> None:
    client = FormClient({"action": "accept", "content": {"color": "red", "count": 2}})
    outcome = await ask(client, {"message": "Which color?", "requestedSchema": FORM})
    assert outcome == ToolOutcome(
        [TextContent('The user answered: {"color":"red","count":2}')],
        False,
        {"action": "accept", "content": {"color": "red", "count": 2}},
    )


@pytest.mark.anyio
async def test_a_declined_form_is_said_in_the_result() -> None:
    outcome = await ask(
        FormClient({"action": "decline"}), {"message": "Which?", "requestedSchema": FORM}
    )
    assert outcome == ToolOutcome(
        [TextContent("The user declined to answer.")], False, {"action": "decline"}
    )


@pytest.mark.anyio
async def test_a_cancelled_form_is_said_in_the_result() -> None:
    outcome = await ask(
        FormClient({"action": "cancel"}), {"message": "Which?", "requestedSchema": FORM}
    )
    assert outcome == ToolOutcome(
        [TextContent("The user cancelled the question without answering.")],
        False,
        {"action": "cancel"},
    )


@pytest.mark.anyio
async def test_an_unknown_action_is_an_error_result() -> None:
    outcome = await ask(
        FormClient({"action": "_later"}), {"message": "Which?", "requestedSchema": FORM}
    )
    assert outcome.content == [
        TextContent("the client answered elicitation/create with an unknown action '_later'")
    ]
    assert outcome.is_error


@pytest.mark.anyio
async def test_a_nested_object_property_is_refused_before_anything_is_sent() -> None:
    client = FormClient()
    form = {"type": "object", "properties": {"address": {"type": "object"}}}
    outcome = await ask(client, {"message": "Where?", "requestedSchema": form})
    assert client.requests == []
    assert outcome.is_error
    assert outcome.content == [
        TextContent(
            "invalid arguments for ask_user: Invalid value 'object' - at "
            "`$.requestedSchema.properties[...].type`"
        )
    ]


@pytest.mark.anyio
async def test_a_required_field_that_is_not_a_property_is_refused() -> None:
    client = FormClient()
    form = {**FORM, "required": ["colour"]}
    outcome = await ask(client, {"message": "Which?", "requestedSchema": form})
    assert client.requests == []
    assert outcome.content == [
        TextContent("requestedSchema.required names 'colour', which is not one of its properties")
    ]


@pytest.mark.anyio
async def test_a_client_without_forms_is_never_sent_one() -> None:
    client = FormClient(forms=False)
    outcome = await ask(client, {"message": "Which?", "requestedSchema": FORM})
    assert client.requests == []
    assert outcome.content == [
        TextContent("the client cannot show a form: ask_user is not available")
    ]


def test_an_mcp_form_keeps_the_keys_of_acps_schema_and_drops_the_others() -> None:
    rendered = {
        "type": "object",
        "title": "Name",
        "properties": {
            "name": {"type": "string", "title": "Name", "description": "Your name"},
            "formal": {"type": "boolean", "default": False, "title": "Formal"},
        },
        "required": ["name"],
    }
    form = form_from_mcp(rendered)
    assert msgspec.to_builtins(form) == {
        "type": "object",
        "title": "Name",
        "properties": {
            "name": {"type": "string", "title": "Name", "description": "Your name"},
            "formal": {"type": "boolean", "title": "Formal"},
        },
        "required": ["name"],
    }


def test_an_mcp_form_with_an_array_property_is_refused() -> None:
    schema = {"type": "object", "properties": {"tags": {"type": "array", "items": {}}}}
    with pytest.raises(FormRefused) as caught:
        form_from_mcp(schema)
    assert str(caught.value) == (
        "the requested schema is not an ACP form: Invalid value 'array' - at "
        "`$.properties[...].type`"
    )
