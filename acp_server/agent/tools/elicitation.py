"""Asking the user a structured question mid-turn: ACP form elicitation (`elicitation/create`).

Two callers: the built-in `ask_user` tool, through which the model asks (offered only to a
client that advertised `elicitation.form`), and the session's MCP servers, whose own
elicitation requests are passed through to the client (`agent.tools.mcp`).

A form's `requestedSchema` is ACP's `ElicitationSchema`: a flat object whose properties are
strings (optionally a single-select enum), numbers, integers or booleans. It is checked before
anything is sent (`check_form`), so the client never receives a form it cannot render; the
model reads what did not fit, as for any tool's arguments. The user's answer (accept with its
content, decline, cancel) comes back as the call's result.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from ...core.content import TextContent
from ..ports import ClientPort
from .arguments import Arguments
from .base import ToolCallInfo, ToolContext, ToolError, ToolOutcome, decode_client_result
from .registry import OnStarted, Tool

METHOD: Final = "elicitation/create"

Title = Annotated[str, Meta(description="A short label for the field.")]
Description = Annotated[str, Meta(description="What the field is for.")]
Count = Annotated[int, Meta(ge=0)]


class _Property(Arguments, tag_field="type"):
    title: Title | UnsetType = UNSET
    description: Description | UnsetType = UNSET


class EnumOption(Arguments):
    const: str
    title: str
    description: str | UnsetType = UNSET


class StringProperty(_Property, tag="string"):
    """Free text, or one choice of `enum` (or of the titled options of `oneOf`)."""

    min_length: Count | UnsetType = UNSET
    max_length: Count | UnsetType = UNSET
    pattern: str | UnsetType = UNSET
    format: Literal["email", "uri", "date", "date-time"] | UnsetType = UNSET
    enum: Annotated[list[str], Meta(min_length=1)] | UnsetType = UNSET
    one_of: Annotated[list[EnumOption], Meta(min_length=1)] | UnsetType = UNSET


class NumberProperty(_Property, tag="number"):
    minimum: float | UnsetType = UNSET
    maximum: float | UnsetType = UNSET


class IntegerProperty(_Property, tag="integer"):
    minimum: int | UnsetType = UNSET
    maximum: int | UnsetType = UNSET


class BooleanProperty(_Property, tag="boolean"):
    pass


FormProperty = StringProperty | NumberProperty | IntegerProperty | BooleanProperty


class FormSchema(Arguments):
    """ACP's `ElicitationSchema`: a flat object of primitive properties."""

    type: Literal["object"]
    properties: Annotated[
        dict[str, FormProperty],
        Meta(min_length=1, description="The fields of the form, by name."),
    ]
    required: Annotated[list[str], Meta(description="The fields that must be filled in.")] = (
        msgspec.field(default_factory=list)
    )
    title: str | UnsetType = UNSET
    description: str | UnsetType = UNSET


class AskUserArgs(Arguments):
    message: Annotated[
        str, Meta(min_length=1, description="The question, as the user will read it.")
    ]
    requested_schema: Annotated[
        FormSchema, Meta(description="The form the user fills in to answer.")
    ]


DESCRIPTION: Final = (
    "Ask the user a question and wait for the answer, when you cannot go on without their "
    "decision or information. `requestedSchema` is the form they fill in: a flat object "
    "(`type: object`) whose `properties` are strings (with `enum` for a choice), numbers, "
    "integers or booleans, and `required` names the fields that must be filled in. The "
    "result says whether they answered (with the values), declined or cancelled."
)

KEYS: Final[dict[Any, frozenset[str]]] = {
    kind.__struct_config__.tag: frozenset(
        [*(f.encode_name for f in msgspec.structs.fields(kind)), "type"]
    )
    for kind in (StringProperty, NumberProperty, IntegerProperty, BooleanProperty)
}
"""The keys each property type has in ACP's schema (camelCase, `type` included)."""


class FormRefused(ToolError):
    """A form that does not fit ACP's `ElicitationSchema`; the message says where."""


def check_form(schema: FormSchema) -> None:
    """What msgspec's types cannot say: required fields exist, bounds are in order."""
    for name in schema.required:
        if name not in schema.properties:
            raise FormRefused(
                f"requestedSchema.required names {name!r}, which is not one of its properties"
            )
    for name, prop in schema.properties.items():
        low, high = _bounds(prop)
        if low is not UNSET and high is not UNSET and low > high:
            raise FormRefused(f"requestedSchema.properties.{name}: the minimum is over the maximum")


def _bounds(prop: FormProperty) -> tuple[Any, Any]:
    if isinstance(prop, StringProperty):
        return prop.min_length, prop.max_length
    if isinstance(prop, (NumberProperty, IntegerProperty)):
        return prop.minimum, prop.maximum
    return UNSET, UNSET


def form_from_mcp(schema: Any) -> FormSchema:
    """An MCP server's `requestedSchema` as an ACP form: the keys of ACP's schema kept, the
    others (such as `default`, which ACP's form has not) left out. `FormRefused` when what is
    left does not fit (a nested object, an array)."""
    if not isinstance(schema, dict):
        raise FormRefused("the requested schema is not an object")
    properties = schema.get("properties")
    if isinstance(properties, dict):
        kept = {}
        for name, prop in properties.items():
            keys = KEYS.get(prop.get("type")) if isinstance(prop, dict) else None
            kept[name] = {k: v for k, v in prop.items() if k in keys} if keys else prop
        schema = {**schema, "properties": kept}
    schema = {k: v for k, v in schema.items() if k in ("type", "properties", "required", "title")}
    try:
        form = msgspec.convert(schema, FormSchema)
    except msgspec.ValidationError as exc:
        raise FormRefused(f"the requested schema is not an ACP form: {exc}") from None
    check_form(form)
    return form


class _Answer(msgspec.Struct):
    """The client's `CreateElicitationResponse`."""

    action: str
    content: dict[str, str | int | float | bool | list[str]] | None = None


Answer = tuple[Literal["accept", "decline", "cancel"], dict[str, Any] | None]


async def elicit(
    client: ClientPort, session_id: str, call_id: str | None, message: str, form: FormSchema
) -> Answer:
    """Ask the user through the client's form; (action, content). A client error raises
    `ClientRequestError`; an answer that is none of ACP's actions raises `ToolError`."""
    params: dict[str, Any] = {"sessionId": session_id}
    if call_id is not None:
        params["toolCallId"] = call_id
    params |= {"message": message, "mode": "form", "requestedSchema": msgspec.to_builtins(form)}
    result = await client.request(METHOD, params)
    answer = decode_client_result(METHOD, result, _Answer)
    if answer.action == "accept":
        return "accept", answer.content or {}
    if answer.action in ("decline", "cancel"):
        return answer.action, None  # type: ignore[return-value]  # narrowed by the test
    raise ToolError(f"the client answered {METHOD} with an unknown action {answer.action!r}")


def answer_outcome(action: str, content: dict[str, Any] | None) -> ToolOutcome:
    """The `ask_user` result the model reads, with the answer as `rawOutput`."""
    if action == "accept":
        values = msgspec.json.encode(content or {}).decode()
        return ToolOutcome(
            [TextContent(f"The user answered: {values}")],
            False,
            {"action": "accept", "content": content or {}},
        )
    if action == "decline":
        text = "The user declined to answer."
    else:
        text = "The user cancelled the question without answering."
    return ToolOutcome([TextContent(text)], False, {"action": action})


async def ask_user(
    ctx: ToolContext, call: ToolCallInfo, args: AskUserArgs, on_started: OnStarted
) -> ToolOutcome:
    check_form(args.requested_schema)
    if not ctx.client.capabilities.elicitation_form:
        # Not offered to such a client; a model that calls it anyway reads why.
        raise ToolError("the client cannot show a form: ask_user is not available")
    await on_started()
    action, content = await elicit(
        ctx.client, ctx.session_id, call.call_id, args.message, args.requested_schema
    )
    return answer_outcome(action, content)


def _title(args: Any) -> str | None:
    message = args.get("message") if isinstance(args, dict) else None
    return f"Ask: {message}" if isinstance(message, str) else None


ASK_USER: Final = Tool.typed("ask_user", DESCRIPTION, AskUserArgs, "other", ask_user, title=_title)
"""Offered to the model only in sessions whose client advertised form elicitation."""
