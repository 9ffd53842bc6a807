"""The official ACP models (the `agent-client-protocol` package) the tests hold frames to.

By method: the params of what a client sends the agent (`TO_AGENT_PARAMS`) and of what the agent
sends a client (`TO_CLIENT_PARAMS`), the result the agent answers each client request with
(`AGENT_RESULTS`) and the result a client answers each agent request with (`CLIENT_RESULTS`);
and `exact`, which holds a value to a model to the letter.

The Python SDK's models trail the protocol: a field they do not know yet (`NEWER_FIELDS`) is
held to the TypeScript SDK 2.4.0's schema instead (`sdk_schema`), and so is the result of a
method they do not know (`SDK_ONLY_RESULTS`, checked by `check_result`).
"""

from __future__ import annotations

import json
from typing import Any, Final

import sdk_schema
from acp import schema
from pydantic import BaseModel, ValidationError

TO_AGENT_PARAMS: dict[str, type[BaseModel]] = {
    "initialize": schema.InitializeRequest,
    "authenticate": schema.AuthenticateRequest,
    "session/new": schema.NewSessionRequest,
    "session/load": schema.LoadSessionRequest,
    "session/resume": schema.ResumeSessionRequest,
    "session/list": schema.ListSessionsRequest,
    "session/close": schema.CloseSessionRequest,
    "session/delete": schema.DeleteSessionRequest,
    "session/prompt": schema.PromptRequest,
    "session/cancel": schema.CancelNotification,
    "session/set_mode": schema.SetSessionModeRequest,
    "session/set_config_option": schema.SetSessionConfigOptionSelectRequest,
    "logout": schema.LogoutRequest,
    "session/fork": schema.ForkSessionRequest,
}
TO_CLIENT_PARAMS: dict[str, type[BaseModel]] = {
    "session/update": schema.SessionNotification,
    "session/request_permission": schema.RequestPermissionRequest,
    "fs/read_text_file": schema.ReadTextFileRequest,
    "fs/write_text_file": schema.WriteTextFileRequest,
    "terminal/create": schema.CreateTerminalRequest,
    "terminal/wait_for_exit": schema.WaitForTerminalExitRequest,
    "terminal/output": schema.TerminalOutputRequest,
    "terminal/release": schema.ReleaseTerminalRequest,
    "terminal/kill": schema.KillTerminalRequest,
    "$/cancel_request": schema.CancelRequestNotification,
    # The server sends form elicitations of a session's tool calls only.
    "elicitation/create": schema.CreateFormSessionElicitationRequest,
}
AGENT_RESULTS: dict[str, type[BaseModel]] = {
    "initialize": schema.InitializeResponse,
    "authenticate": schema.AuthenticateResponse,
    "session/new": schema.NewSessionResponse,
    "session/load": schema.LoadSessionResponse,
    "session/resume": schema.ResumeSessionResponse,
    "session/list": schema.ListSessionsResponse,
    "session/close": schema.CloseSessionResponse,
    "session/delete": schema.DeleteSessionResponse,
    "session/prompt": schema.PromptResponse,
    "session/set_mode": schema.SetSessionModeResponse,
    "session/set_config_option": schema.SetSessionConfigOptionResponse,
    "logout": schema.LogoutResponse,
    "session/fork": schema.ForkSessionResponse,
}
CLIENT_RESULTS: dict[str, type[BaseModel]] = {
    "session/request_permission": schema.RequestPermissionResponse,
    "fs/read_text_file": schema.ReadTextFileResponse,
    "fs/write_text_file": schema.WriteTextFileResponse,
    "terminal/create": schema.CreateTerminalResponse,
    "terminal/wait_for_exit": schema.WaitForTerminalExitResponse,
    "terminal/output": schema.TerminalOutputResponse,
    "terminal/release": schema.ReleaseTerminalResponse,
    "terminal/kill": schema.KillTerminalResponse,
}


SDK_ONLY_RESULTS: Final[dict[str, str]] = {
    "session/set_title": "SetSessionTitleResponse",
    "session/status": "SessionStatusResponse",
    "session/archive": "ArchiveSessionResponse",
    "session/unarchive": "UnarchiveSessionResponse",
}
"""The methods newer than the Python SDK's models: their results' definitions in the SDK 2.4.0
schema."""

_SESSION_CAPABILITIES: Final = ("agentCapabilities", "sessionCapabilities")
NEWER_FIELDS: Final[dict[str, frozenset[tuple[str, ...]]]] = {
    # The tool call `name` (ACP 1.22), on `tool_call` and `tool_call_update`.
    "SessionNotification": frozenset({("update", "name")}),
    # `session/set_title`, `session/status`, `session/archive` (unstable).
    "InitializeResponse": frozenset(
        {(*_SESSION_CAPABILITIES, "title"), (*_SESSION_CAPABILITIES, "status")}
        | {(*_SESSION_CAPABILITIES, "archive"), (*_SESSION_CAPABILITIES, "systemPrompt")}
    ),
    "ListSessionsResponse": frozenset({("sessions", "*", "archived")}),
    # One session of `session.list.follow` (SPEC 3.5), its `running` taken off.
    "SessionInfo": frozenset({("archived",)}),
}
"""By model: where a value may hold a field the Python SDK's model does not know (`*`: any
index of a list); a value that does is held to the SDK 2.4.0 schema's definition of that name."""


def check_result(method: str, value: Any, what: str) -> None:
    """The result of an agent method: `exact` to the Python SDK's model where it has one, else
    valid for the SDK 2.4.0 schema."""
    if method in AGENT_RESULTS:
        exact(AGENT_RESULTS[method], value, what)
    else:
        sdk_schema.check(SDK_ONLY_RESULTS[method], value)


def _dropped(value: Any, dumped: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The paths of `value`'s object keys that `dumped` lacks (list indexes as `*`)."""
    if isinstance(value, dict) and isinstance(dumped, dict):
        found: list[tuple[str, ...]] = []
        for key, item in value.items():
            if key not in dumped:
                found.append((*path, key))
            else:
                found.extend(_dropped(item, dumped[key], (*path, key)))
        return found
    if isinstance(value, list) and isinstance(dumped, list) and len(value) == len(dumped):
        return [p for a, b in zip(value, dumped, strict=True) for p in _dropped(a, b, (*path, "*"))]
    return []


def _without(value: Any, path: tuple[str, ...]) -> Any:
    """`value` with the key at `path` removed (a copy)."""
    if not path:
        return value
    if isinstance(value, list):
        return [_without(item, path[1:]) for item in value]
    if isinstance(value, dict):
        if len(path) == 1:
            return {k: v for k, v in value.items() if k != path[0]}
        return {k: (_without(v, path[1:]) if k == path[0] else v) for k, v in value.items()}
    return value


def exact(model: type[BaseModel], value: Any, what: str) -> None:
    """`value` validates against `model` and dumps back to itself (nothing dropped or coerced),
    else a failure naming `what`. A field newer than the model (`NEWER_FIELDS`) is the one
    exception: the whole value must then fit the SDK 2.4.0 schema."""
    try:
        parsed = model.model_validate(value)
    except ValidationError as exc:
        raise AssertionError(
            f"{what} violates ACP ({model.__name__}): {json.dumps(value)}\n{exc}"
        ) from None
    dumped = parsed.model_dump(mode="json", by_alias=True, exclude_unset=True)
    newer = NEWER_FIELDS.get(model.__name__, frozenset())
    dropped = set(_dropped(value, dumped))
    if dropped and dropped <= newer:
        sdk_schema.check(model.__name__, value)
        for path in dropped:
            value = _without(value, path)
    assert dumped == value, (
        f"{what} does not fit {model.__name__} exactly:\n{json.dumps(value)}\n!=\n{json.dumps(dumped)}"
    )
