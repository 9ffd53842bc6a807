"""Asking the user before a tool changes something: `session/request_permission` (SPEC 4.3).

The session's mode decides first (SPEC 4.4, `core.modes.permission_decision`): plan mode
refuses without asking, `accept-edits` lets edits through, `full-access` everything.

Three options are offered: `allow_once`, `allow_always` (remembered for that tool for the rest
of the session, in `ToolContext.allowed_always`) and `reject_once`. Anything but an allowing
answer ends the call with an error outcome the model reads; a cancelled turn propagates as
cancellation (the request is abandoned by the client port), never as an answer.

How each request ended goes to `ToolContext.on_permission` (the turn logs it as a
`permission/decision` event): the option the client selected, or `cancelled` when the client
answered so or when the turn was cancelled before it answered (ACP's meaning of `cancelled`),
`timeout` when no client was attached to answer it in time (the port's `RequestTimedOut`). A
request that ended with no answer at all (a client error, a malformed answer) has no decision.
A decision the mode or an earlier `allow_always` made asks nothing and logs nothing.
"""

from __future__ import annotations

import contextlib
from typing import Any, Final

import anyio
import msgspec
from msgspec import Struct

from ...core.acp_updates import parse_arguments
from ...core.events import PermissionOutcome
from ...core.modes import permission_decision, plan_mode_refusal
from ...storage.errors import LogWriteFailed
from ..ports import ClientPort, RequestTimedOut
from .base import ToolCallInfo, ToolContext, ToolError

PERMISSION_OPTIONS: Final[list[dict[str, str]]] = [
    {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
]


class _Selected(Struct, tag="selected", tag_field="outcome", rename="camel"):
    option_id: str


class _Cancelled(Struct, tag="cancelled", tag_field="outcome"):
    pass


class _PermissionResponse(Struct):
    # Unknown keys (`_meta`, future fields) are tolerated: the client is not ours to police.
    outcome: _Selected | _Cancelled


def permission_params(ctx: ToolContext, call: ToolCallInfo) -> dict[str, Any]:
    """The params of the `session/request_permission` request for `call`."""
    return {
        "sessionId": ctx.session_id,
        "toolCall": {
            "toolCallId": call.call_id,
            "title": call.title,
            "kind": call.kind,
            "status": "pending",
            "rawInput": parse_arguments(call.arguments),
        },
        "options": PERMISSION_OPTIONS,
    }


async def ensure_permission(ctx: ToolContext, call: ToolCallInfo) -> None:
    """Return when the call may run; raise `ToolError` when it may not.

    `ClientRequestError` from the request propagates (the caller turns it into an outcome).
    """
    decision = permission_decision(ctx.mode(), call.kind)
    if decision == "refuse":
        raise ToolError(plan_mode_refusal(call.name))
    if decision == "allow" or call.name in ctx.allowed_always:
        return
    try:
        chosen = await permission_answer(ctx.client, permission_params(ctx, call))
    except anyio.get_cancelled_exc_class():
        # The cancellation is what ends the call: a log that cannot take the decision must
        # not replace it with a write failure.
        with contextlib.suppress(LogWriteFailed):
            _decided(ctx, call, "cancelled")
        raise
    except RequestTimedOut as exc:
        _decided(ctx, call, "timeout")
        raise ToolError(
            f"no client answered the permission request within {exc.seconds:g} seconds"
        ) from None
    if chosen is None:
        _decided(ctx, call, "cancelled")
        raise ToolError("permission request cancelled")
    _decided(ctx, call, "selected", chosen)
    if chosen == "allow_once":
        return
    if chosen == "allow_always":
        ctx.allowed_always.add(call.name)
        return
    if chosen == "reject_once":
        raise ToolError("the user rejected this tool call")
    raise ToolError(f"the client chose an unknown permission option {chosen!r}")


def _decided(
    ctx: ToolContext, call: ToolCallInfo, outcome: PermissionOutcome, option_id: str | None = None
) -> None:
    if ctx.on_permission is not None:
        ctx.on_permission(call.call_id, outcome, option_id)


async def permission_answer(client: ClientPort, params: dict[str, Any]) -> str | None:
    """Ask `session/request_permission` with `params`: the option chosen, or None when the
    request was cancelled; `ToolError` for a malformed answer."""
    result = await client.request("session/request_permission", params)
    try:
        outcome = msgspec.convert(result, _PermissionResponse).outcome
    except msgspec.ValidationError as exc:
        raise ToolError(f"the client sent a malformed permission answer: {exc}") from None
    return None if isinstance(outcome, _Cancelled) else outcome.option_id
