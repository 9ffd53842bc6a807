"""Prompt turns through the real server (a test helper for the `test_prompt_*` files).

`PromptServer` spawns `acp-server serve --replay FIXTURE --sessions-dir TMP` with a temporary
workspace as the session's `cwd`, plays the client's side (`FakeClient`: permission answers, an
in-memory file system for `fs/*`, a scripted terminal), and reads back what a test asserts:
the `session/update` payloads of a prompt, its response, and the session log's logical events.

Every frame the server writes is checked when the server is closed: against the JSON-RPC
envelope rules and the official ACP models of the `agent-client-protocol` package (each payload
must validate and dump back to exactly what was sent, so a stray or mistyped field fails).
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import jsonschema
import msgspec
import sdk_schema
from acp import schema
from acp_models import TO_CLIENT_PARAMS, check_result, exact
from acp_process import AcpProcess, RpcFailure, assert_jsonrpc_frame
from fixtures_builder import Scenario, Step, ToolUse, step_chunks, write_fixture
from polling import TIMEOUT

from acp_server.core.json_values import map_strings
from acp_server.storage.jsonl.log import read_log

ALL_CAPABILITIES = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True}


SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"
HISTORY_SCHEMAS = {
    method: jsonschema.Draft202012Validator(json.loads((SCHEMAS / name).read_text()))
    for method, name in {
        "session.event": "session-event.notification.schema.json",
        "session.followEnded": "session-follow-ended.notification.schema.json",
        "session.follow": "session-follow.result.schema.json",
        "session.page": "session-page.result.schema.json",
    }.items()
}
"""The history API's own frames (not ACP's): the committed schema a notification or a
result fits."""

PERMISSION_OPTIONS = [
    {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
]


def replace_strings(value: Any, replacements: list[tuple[str, str]]) -> Any:
    """`value` with every occurrence of each `old` in its strings (keys too) replaced by `new`."""

    def replace(text: str) -> str:
        for old, new in replacements:
            text = text.replace(old, new)
        return text

    return map_strings(value, replace)


@dataclass
class FakeClient:
    """The client's answers to the server's requests, and a record of those requests."""

    permissions: list[str] = field(default_factory=list)
    """Answers to `session/request_permission`, in order: an option id or "cancelled". A
    request beyond them fails the test."""
    files: dict[str, str] = field(default_factory=dict)
    """The client's file system for `fs/*` (absolute path -> text); writes land here."""
    terminal_output: str = ""
    exit_code: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)
    """Every request the server sent: {"method", "params"}, in order."""

    def answer(self, frame: dict[str, Any]) -> Any:
        method, params = frame["method"], frame["params"]
        self.requests.append({"method": method, "params": params})
        if method == "session/request_permission":
            assert self.permissions, f"unexpected permission request: {params}"
            choice = self.permissions.pop(0)
            if choice == "cancelled":
                return {"outcome": {"outcome": "cancelled"}}
            return {"outcome": {"outcome": "selected", "optionId": choice}}
        if method == "fs/read_text_file":
            if params["path"] not in self.files:
                return RpcFailure(-32002, f"Resource not found: {params['path']}")
            return {"content": self.files[params["path"]]}
        if method == "fs/write_text_file":
            self.files[params["path"]] = params["content"]
            return {}
        if method == "terminal/create":
            return {"terminalId": "term-1"}
        if method == "terminal/wait_for_exit":
            return {"exitCode": self.exit_code, "signal": None}
        if method == "terminal/output":
            return {
                "output": self.terminal_output,
                "truncated": False,
                "exitStatus": {"exitCode": self.exit_code, "signal": None},
            }
        if method == "terminal/release":
            return {}
        raise AssertionError(f"unexpected request from the server: {frame}")


@dataclass
class Answered:
    """One request's response and the frames the server sent before it."""

    response: dict[str, Any]
    frames: list[dict[str, Any]]
    normalize: Callable[[Any], Any]

    @property
    def result(self) -> Any:
        assert "result" in self.response, f"expected a result, got {self.response}"
        return self.response["result"]

    @property
    def error(self) -> Any:
        assert "error" in self.response, f"expected an error, got {self.response}"
        return self.response["error"]

    @property
    def stop_reason(self) -> str:
        return self.result["stopReason"]

    @property
    def updates(self) -> list[dict[str, Any]]:
        """The `params.update` of every `session/update` before the response, paths normalized."""
        return [
            self.normalize(f["params"]["update"])
            for f in self.frames
            if f.get("method") == "session/update"
        ]

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The server's requests and other notifications, as {"method", "params"}, normalized."""
        return [
            self.normalize({"method": f["method"], "params": f["params"]})
            for f in self.frames
            if "method" in f and f["method"] != "session/update"
        ]

    def text(self, kind: str = "agent_message_chunk") -> str:
        return "".join(u["content"]["text"] for u in self.updates if u["sessionUpdate"] == kind)


class PromptServer:
    """The real server over a fixture built from `scenario` (None: a bare server, with no
    `--replay`), with one workspace under `tmp_path`.

    Use as a context manager: leaving it ends the server's input and checks that it exited with
    status 0, logged no traceback, and wrote only frames the ACP models accept.

    Automatic titles are off (`--titles off`) unless `titles` names a mode (None: the server's
    default): the logs and updates these tests assert are the turns', and the title after a
    first turn is the concern of the title tests alone.
    """

    def __init__(
        self,
        tmp_path: Path,
        scenario: Scenario | Path | None,
        *flags: str,
        capabilities: dict[str, Any] | None = None,
        client: FakeClient | None = None,
        store: str | None = None,
        titles: str | None = "off",
    ) -> None:
        self.tmp = tmp_path.resolve()
        self.workspace = self.tmp / "workspace"
        self.workspace.mkdir(parents=True, exist_ok=True)
        self.sessions_dir = self.tmp / "sessions"
        if scenario is None:  # a bare server: no --replay
            replay: tuple[str, ...] = ()
        elif isinstance(scenario, Path):
            replay = ("--replay", str(scenario))
        else:
            replay = ("--replay", str(write_fixture(self.tmp / "fixture", scenario)))
        self.client = client if client is not None else FakeClient()
        self.methods: dict[Any, str] = {}
        self.answered_early: dict[Any, Answered] = {}
        """Responses read while waiting for another request's (by id)."""
        if titles is not None:
            flags = ("--titles", titles, *flags)
        # A store URL replaces the sessions directory (`--store`; `log` then reads nothing).
        if store is None:
            self.process = AcpProcess(self.sessions_dir, *replay, *flags)
        else:
            self.process = AcpProcess(None, "--store", store, *replay, *flags)
        self.session_ids: dict[str, str] = {}
        """Session ids -> their placeholder in normalized values."""
        result = self.request(
            "initialize", {"protocolVersion": 1, "clientCapabilities": capabilities or {}}
        ).result
        assert result["protocolVersion"] == 1

    # -- requests -------------------------------------------------------------------------------

    def send_request(self, method: str, params: Any) -> int:
        request_id = self.process.send_request(method, params)
        self.methods[request_id] = method
        return request_id

    def read_until_response(
        self, request_id: Any, *, answer: bool = True, timeout: float = TIMEOUT
    ) -> Answered:
        """Read frames until the response to `request_id`, answering the server's requests
        with the fake client unless `answer` is false (then they are only collected)."""
        if request_id in self.answered_early:
            return self.answered_early.pop(request_id)
        frames: list[dict[str, Any]] = []
        while True:
            frame = self.process.read_frame(timeout)
            if frame.get("id") == request_id and "method" not in frame:
                return Answered(frame, frames, self.normalize)
            if "method" not in frame and frame.get("id") in self.methods:
                # Another request of ours answered first: kept for its own read.
                self.answered_early[frame["id"]] = Answered(frame, list(frames), self.normalize)
            frames.append(frame)
            if "method" in frame and "id" in frame and answer:
                self.reply(frame["id"], self.client.answer(frame))

    def reply(self, request_id: Any, reply: Any) -> None:
        """Answer one of the server's requests (a result value or an `RpcFailure`)."""
        if isinstance(reply, RpcFailure):
            self.process.send(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "error": {"code": reply.code, "message": reply.message},
                }
            )
        else:
            self.process.send({"jsonrpc": "2.0", "id": request_id, "result": reply})

    def request(self, method: str, params: Any, *, timeout: float = TIMEOUT) -> Answered:
        return self.read_until_response(self.send_request(method, params), timeout=timeout)

    def new_session(
        self, mcp_servers: list[dict[str, Any]] | None = None, *, timeout: float = TIMEOUT
    ) -> str:
        session_id = self.request(
            "session/new",
            {"cwd": str(self.workspace), "mcpServers": mcp_servers or []},
            timeout=timeout,
        ).result["sessionId"]
        self.session_ids[session_id] = (
            "<session>" if not self.session_ids else f"<session-{len(self.session_ids)}>"
        )
        return session_id

    def prompt(self, session_id: str, text: str, *, timeout: float = TIMEOUT) -> Answered:
        return self.request("session/prompt", self.prompt_params(session_id, text), timeout=timeout)

    @staticmethod
    def prompt_params(session_id: str, text: str) -> dict[str, Any]:
        return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}

    def cancel(self, session_id: str) -> None:
        self.process.notify("session/cancel", {"sessionId": session_id})

    def read_update(self, timeout: float = TIMEOUT) -> dict[str, Any]:
        """The next frame, which must be a `session/update`; its `params.update`, normalized."""
        frame = self.process.read_frame(timeout)
        assert frame.get("method") == "session/update", frame
        return self.normalize(frame["params"]["update"])

    # -- reading back ---------------------------------------------------------------------------

    def normalize(self, value: Any) -> Any:
        """Paths and session ids as placeholders: the workspace is `<cwd>`, the temporary
        directory `<tmp>`, session ids `<session>` (children named by the test)."""
        replacements = [(str(self.workspace), "<cwd>"), (str(self.tmp), "<tmp>")]
        replacements += list(self.session_ids.items())
        return replace_strings(value, replacements)

    def log_path(self, session_id: str) -> Path:
        return self.sessions_dir / session_id / "session.jsonl"

    def log(self, session_id: str) -> list[dict[str, Any]]:
        """The session's logical events as {type, data, sourceRange?}, normalized.

        Seqs must run 0, 1, 2, ... and times are dropped (they are the clock's).
        """
        events = read_log(self.log_path(session_id)).events
        values = [msgspec.json.decode(msgspec.json.encode(event)) for event in events]
        assert [v["seq"] for v in values] == list(range(len(values)))
        return [
            self.normalize({k: v for k, v in value.items() if k not in ("seq", "time")})
            for value in values
        ]

    # -- ending ---------------------------------------------------------------------------------

    def close(self) -> None:
        assert self.process.finish(TIMEOUT) == 0, self.process.stderr
        assert "Traceback" not in self.process.stderr, self.process.stderr
        assert self.process.stdout_tail == b""
        for line in self.process.stdout_lines:
            self.check_frame(line)

    def check_frame(self, line: bytes) -> None:
        frame = assert_jsonrpc_frame(line)
        history = HISTORY_SCHEMAS.get(frame.get("method", self.methods.get(frame.get("id"))))
        if history is not None and "error" not in frame:
            history.validate(frame if "method" in frame else frame["result"])
        elif newer_update(frame):
            sdk_schema.check("SessionNotification", frame["params"])
        elif "method" in frame:
            method = frame["method"]
            assert method in TO_CLIENT_PARAMS, f"the server sent an unexpected method: {frame}"
            if "id" in frame:
                schema.AgentRequest.model_validate(frame)
            else:
                schema.AgentNotification.model_validate(frame)
            exact(TO_CLIENT_PARAMS[method], frame["params"], method)
        elif "error" in frame:
            schema.AgentErrorMessage.model_validate(
                {k: v for k, v in frame.items() if k != "jsonrpc"}
            )
        else:
            method = self.methods[frame["id"]]
            check_result(method, frame["result"], f"the result of {method}")

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.process.kill()
            sys.stderr.write(self.process.stderr)


def newer_update(frame: dict[str, Any]) -> bool:
    """A session update of the newer schema, which the Python SDK's models do not know: held to
    the TypeScript SDK's schema instead (`sdk_schema`)."""
    if frame.get("method") != "session/update":
        return False
    update = frame.get("params", {}).get("update", {})
    return isinstance(update, dict) and update.get("sessionUpdate") in sdk_schema.PYTHON_MODELS_LACK


def chunk_events(turn: int, step: int, chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The `assistant/chunk` events a step's chunks are logged as, in order."""
    return [
        {"type": "assistant/chunk", "data": {"turn": turn, "step": step, "chunk": c}}
        for c in chunks
    ]


def message_chunks(
    texts: list[str], message_id: str, kind: str = "agent_message_chunk"
) -> list[dict[str, Any]]:
    """The `session/update`s that show `texts` (text fragments) live."""
    return [
        {"sessionUpdate": kind, "content": {"type": "text", "text": t}, "messageId": message_id}
        for t in texts
    ]


def turn_opening(turn: int, prompt: str) -> list[dict[str, Any]]:
    """`turn/start` and the `user/message` of a text prompt."""
    return [
        {"type": "turn/start", "data": {"turn": turn}},
        {
            "type": "user/message",
            "data": {
                "turn": turn,
                "message": {"id": f"user-{turn}", "content": [{"type": "text", "text": prompt}]},
            },
        },
    ]


def text_result(text: str) -> list[dict[str, Any]]:
    """A `tool_call_update`'s content holding one text block."""
    return [{"type": "content", "content": {"type": "text", "text": text}}]


# -- one tool call in a turn ---------------------------------------------------------------------
# A turn of two model calls: a step that calls one tool, then a step that answers "Done.".

DONE = Step(text="Done.")
DONE_UPDATES = message_chunks(["Don", "e", "."], "assistant-0-1")


def checkpoints(path: str, before: str | None, after: str) -> dict[str, Any]:
    """The `checkpoints` of a tool/result that changed `path` from `before` (None: absent) to
    `after`."""

    def digest(text: str) -> str:
        return hashlib.sha256(text.encode()).hexdigest()

    checkpoint = {"path": path, "before": None if before is None else digest(before)}
    return {"checkpoints": [{**checkpoint, "after": digest(after)}]}


def one_tool_turn(call: ToolUse) -> Scenario:
    return Scenario([("go", [Step(calls=[call]), DONE])])


def decision(call_id: str, answer: str, turn: int = 0, step: int = 0) -> dict[str, Any]:
    """The `permission/decision` event of the answer `answer` (an option id or "cancelled")
    to the permission request of `call_id`."""
    data: dict[str, Any] = {"turn": turn, "step": step, "callId": call_id}
    if answer == "cancelled":
        data["outcome"] = "cancelled"
    else:
        data |= {"outcome": "selected", "optionId": answer}
    return {"type": "permission/decision", "data": data}


def one_tool_log(
    call: ToolUse, result: dict[str, Any], answer: str | None = None
) -> list[dict[str, Any]]:
    """The log of `one_tool_turn(call)`, with `result` as the tool/result's data (after
    turn, step and callId); `answer` is the client's answer to its permission request (an
    option id or "cancelled"), None when none was asked."""
    tool_step = Step(calls=[call])
    n0, n1 = len(step_chunks(tool_step)), len(step_chunks(DONE))
    call_seq = 3 + n0 + 1
    decisions = [] if answer is None else [decision(call.id, answer)]
    # after the decision, the result, step/end and step/start
    second = call_seq + len(decisions) + 4
    return [
        *turn_opening(0, "go"),
        {"type": "step/start", "data": {"turn": 0, "step": 0}},
        *chunk_events(0, 0, step_chunks(tool_step)),
        {
            "type": "assistant/message",
            "data": {
                "turn": 0,
                "step": 0,
                "message": {
                    "id": "assistant-0-0",
                    "content": [
                        {
                            "type": "tool-call",
                            "id": call.id,
                            "name": call.name,
                            "arguments": call.arguments,
                        }
                    ],
                },
            },
            "sourceRange": [3, 2 + n0],
        },
        {
            "type": "tool/call",
            "data": {
                "turn": 0,
                "step": 0,
                "callId": call.id,
                "name": call.name,
                "arguments": call.arguments,
            },
        },
        *decisions,
        {
            "type": "tool/result",
            "data": {"turn": 0, "step": 0, "callId": call.id, **result},
            "sourceRange": [call_seq, call_seq],
        },
        {"type": "step/end", "data": {"turn": 0, "step": 0}},
        {"type": "step/start", "data": {"turn": 0, "step": 1}},
        *chunk_events(0, 1, step_chunks(DONE)),
        {
            "type": "assistant/message",
            "data": {
                "turn": 0,
                "step": 1,
                "message": {"id": "assistant-0-1", "content": [{"type": "text", "text": "Done."}]},
            },
            "sourceRange": [second, second + n1 - 1],
        },
        {"type": "step/end", "data": {"turn": 0, "step": 1}},
        {"type": "turn/end", "data": {"turn": 0, "reason": {"kind": "completed"}}},
    ]


def permission_request(call_id: str, title: str, kind: str, raw_input: Any) -> dict[str, Any]:
    return {
        "method": "session/request_permission",
        "params": {
            "sessionId": "<session>",
            "toolCall": {
                "toolCallId": call_id,
                "title": title,
                "kind": kind,
                "status": "pending",
                "rawInput": raw_input,
            },
            "options": PERMISSION_OPTIONS,
        },
    }


def in_progress(call_id: str, name: str) -> dict[str, Any]:
    """The update saying a call of the tool `name` has started."""
    return {
        "sessionUpdate": "tool_call_update",
        "toolCallId": call_id,
        "status": "in_progress",
        "name": name,
    }
