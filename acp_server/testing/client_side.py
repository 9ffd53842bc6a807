"""The client side of a scenario's prompt: the server's requests (permission, `fs/*`,
`terminal/*`) answered from the prompt's scripted answers, against the scenario's workspace.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from msgspec import UNSET

from .process import encode_line
from .scenario import (
    Answer,
    ErrorAnswer,
    PermissionAnswer,
    PromptStep,
    ReadAnswer,
    ScenarioError,
    TerminalAnswer,
    WriteAnswer,
)

RESOURCE_NOT_FOUND: Final = -32002


@dataclass
class PromptContext:
    step: PromptStep
    where: str
    answers: list[Answer]
    used: int = 0
    updates: int = 0
    cancel_sent: bool = False
    terminals: dict[str, TerminalAnswer] = field(default_factory=dict)
    turn_ends: set[str] = field(default_factory=set)
    """Subscriptions whose `session.event` stream has shown this prompt's `turn/end`."""

    def next_answer(self, method: str) -> Answer:
        if self.used >= len(self.answers):
            raise ScenarioError(
                f"{self.where}: the server sent {method} but the script has no answer left "
                f"({len(self.answers)} given)"
            )
        answer = self.answers[self.used]
        self.used += 1
        return answer


ANSWERS_FOR: Final[dict[str, type]] = {
    "session/request_permission": PermissionAnswer,
    "fs/read_text_file": ReadAnswer,
    "fs/write_text_file": WriteAnswer,
    "terminal/create": TerminalAnswer,
}


def answer_request(
    frame: dict[str, Any], context: PromptContext | None, workspace: Path
) -> dict[str, Any]:
    """The client's answer to one request of the server's, from the prompt's scripted answers:
    `{"result": ...}` or `{"error": ...}`."""
    method = frame["method"]
    params = frame.get("params") or {}
    if context is None:
        raise ScenarioError(
            f"the server sent a request outside a prompt: {encode_line(frame)[:300]}"
        )
    if method.startswith("terminal/") and method != "terminal/create":
        return _terminal(method, params, context)
    answer = context.next_answer(method)
    expected = ANSWERS_FOR.get(method)
    if not isinstance(answer, ErrorAnswer) and type(answer) is not expected:
        raise ScenarioError(
            f"{context.where}: answers[{context.used - 1}] is a {answer.__struct_config__.tag!r} answer, "
            f"but the server sent {method}: {encode_line(params)[:300]}"
        )
    return _reply(answer, method, params, context, workspace)


def _reply(
    answer: Answer,
    method: str,
    params: dict[str, Any],
    context: PromptContext,
    workspace: Path,
) -> dict[str, Any]:
    if isinstance(answer, ErrorAnswer):
        return {"error": {"code": answer.code, "message": answer.message}}
    if isinstance(answer, PermissionAnswer):
        if answer.cancelled:
            return {"result": {"outcome": {"outcome": "cancelled"}}}
        return {"result": {"outcome": {"outcome": "selected", "optionId": answer.option_id}}}
    if isinstance(answer, ReadAnswer):
        if answer.content is not UNSET:
            return {"result": {"content": answer.content}}
        return _read_workspace(params, workspace)
    if isinstance(answer, WriteAnswer):
        path = _workspace_path(params.get("path"), method, workspace)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(params.get("content", ""), encoding="utf-8")
        return {"result": {}}
    assert isinstance(answer, TerminalAnswer)
    terminal_id = f"term-{len(context.terminals) + 1}"
    context.terminals[terminal_id] = answer
    return {"result": {"terminalId": terminal_id}}


def _workspace_path(raw: Any, method: str, workspace: Path) -> Path:
    if not isinstance(raw, str) or not os.path.isabs(raw):
        raise ScenarioError(f"{method}: the server sent a path that is not absolute: {raw!r}")
    path = Path(os.path.normpath(raw))
    if not path.is_relative_to(workspace):
        raise ScenarioError(f"{method}: {raw} is outside the scenario's workspace")
    return path


def _read_workspace(params: dict[str, Any], workspace: Path) -> dict[str, Any]:
    path = _workspace_path(params.get("path"), "fs/read_text_file", workspace)
    relative = path.relative_to(workspace)
    if not path.is_file():
        return {"error": {"code": RESOURCE_NOT_FOUND, "message": f"Resource not found: {relative}"}}
    text = path.read_text(encoding="utf-8")
    line, limit = params.get("line"), params.get("limit")
    if line is not None or limit is not None:
        lines = text.splitlines(keepends=True)
        start = max((line or 1) - 1, 0)
        text = "".join(lines[start : start + limit] if limit is not None else lines[start:])
    return {"result": {"content": text}}


def _terminal(method: str, params: dict[str, Any], context: PromptContext) -> dict[str, Any]:
    terminal_id = params.get("terminalId")
    if not isinstance(terminal_id, str) or terminal_id not in context.terminals:
        raise ScenarioError(
            f"{context.where}: {method} names terminal {terminal_id!r}, which is not open"
        )
    answer = context.terminals[terminal_id]
    status = {"exitCode": answer.exit_code, "signal": answer.signal}
    if method == "terminal/wait_for_exit":
        return {"result": status}
    if method == "terminal/output":
        return {
            "result": {
                "output": answer.output,
                "truncated": answer.truncated,
                "exitStatus": status,
            }
        }
    if method == "terminal/release":
        del context.terminals[terminal_id]
        return {"result": {}}
    if method == "terminal/kill":
        return {"result": {}}
    raise ScenarioError(f"{context.where}: the server sent an unknown terminal method {method}")
