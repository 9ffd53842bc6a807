"""The ACP conformance kit's client, as far as tests/test_v2_conformance.py needs it (a test helper).

The kit (`acp-tck --protocol-version 2`) spawns the agent once per check, speaks v2 to it with
raw JSON lines and judges what comes back; it cannot be installed here, so this module does what
its client does: the exact `initialize` params it sends, its prompt turn (`prompt_turn`: answer
`session/request_permission` with the first option, any other request with `-32601`, read until
the receipt and the idle that ends the turn, optionally cancelling when `running` first shows),
and, once the process has ended (`finish`), its checks of everything the agent wrote:

- every stdout line is UTF-8 and one JSON value: a JSON-RPC 2.0 object or a non-empty array of
  them (nothing pretty-printed, no log noise);
- every message validates against SDK 2.4.0's v2 schema (`schema.unstable.json`, as the kit
  validates against its pin's unstable schema): a notification or request by its method's
  params, a result by the method of the request it answers; `_`-prefixed methods are exempt;
- the agent calls only the methods a v2 client has (the kit's `CLIENT_METHODS`, `$/cancel_request`)
  and answers only what was asked: every response names an id this client sent as a request,
  once (`null` only for lines sent as invalid on purpose), so a notification is never answered;
- an error's `code` is an integer and its `message` one non-empty line;
- every `_meta`, anywhere, is an object or null;
- the root keys of every params and result are ones its definition names;
- every update's kind, state and stop reason is one the kit's pin has (or `_`-prefixed).

Where the kit waits out a quiet period ("nothing within 2 s"), these checks look at the whole of
stdout once the process has exited instead: nothing can arrive later than that.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp_process import AcpProcess
from jsonschema import Draft202012Validator
from sdk_schema import SCHEMA_V2, _schema

STANDARD_INIT: dict[str, Any] = {
    "protocolVersion": 2,
    "info": {"name": "acp-tck", "version": "0.1.0"},
    "capabilities": {},
}
"""The params of the kit's `initialize` (no `clientInfo`, no `clientCapabilities`)."""

CANCEL_PROMPT = (
    "Write a very long, detailed step-by-step explanation of how a compiler works, at least "
    "2000 words."
)
"""The kit's default `--tck-cancel-prompt`."""

STOP_REASONS = frozenset({"end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"})
"""The stop reasons of the kit's pin (anything else must begin with `_`)."""

UPDATE_KINDS = frozenset(
    {
        "user_message_chunk",
        "user_message",
        "agent_message_chunk",
        "agent_message",
        "agent_thought_chunk",
        "agent_thought",
        "state_update",
        "tool_call_content_chunk",
        "tool_call_update",
        "terminal_update",
        "terminal_output_chunk",
        "plan_update",
        "plan_removed",
        "available_commands_update",
        "config_option_update",
        "session_info_update",
        "usage_update",
        "notice",
        "compaction_update",
        "compaction_summary_chunk",
    }
)
"""The 20 `sessionUpdate` kinds of the kit's pin."""

MESSAGE_KINDS = frozenset(
    {
        "user_message",
        "user_message_chunk",
        "agent_message",
        "agent_message_chunk",
        "agent_thought",
        "agent_thought_chunk",
    }
)
"""The message-history kinds (whole messages and their chunks)."""

CLIENT_METHODS = frozenset(
    {
        "session/request_permission",
        "session/update",
        "elicitation/create",
        "elicitation/complete",
        "mcp/message",
        "$/cancel_request",
    }
)
"""What an agent may call on a v2 client, by the kit's pin (and the protocol-level cancel)."""

ABSENT: Any = object()
"""Marks a request sent with no `params` key at all (as the kit sends `_tck/...` and batches)."""


@functools.cache
def _method_definitions() -> tuple[dict[str, str], dict[str, str]]:
    """The v2 schema's definitions by method: (results of client requests, params of what the
    agent sends), from the schema's own `x-method`/`x-side` annotations."""
    results: dict[str, str] = {}
    params: dict[str, str] = {}
    for name, definition in _schema(SCHEMA_V2)["$defs"].items():
        method, side = definition.get("x-method"), definition.get("x-side")
        if method is None:
            continue
        if side == "agent" and name.endswith("Response"):
            results[method] = name
        elif side in ("client", "protocol") and name.endswith(("Request", "Notification")):
            params[method] = name
    return results, params


@functools.cache
def _validator(definition: str) -> Draft202012Validator:
    schema = _schema(SCHEMA_V2)
    return Draft202012Validator({"$defs": schema["$defs"], "$ref": f"#/$defs/{definition}"})


def violations_of(definition: str, value: Any) -> list[str]:
    """Why `value` is not a valid `definition` of the v2 schema (empty when it is), root keys
    the definition does not name included (the kit's SCHEMA-002 judges those against its pin:
    the schema itself lets unknown keys through)."""
    found = [
        f"{definition} {list(error.path)}: {error.message}"
        for error in _validator(definition).iter_errors(value)
    ]
    named = _schema(SCHEMA_V2)["$defs"][definition].get("properties")
    if isinstance(value, dict) and named is not None:
        found += [
            f"{definition}: a root key it does not name: {key}" for key in value if key not in named
        ]
    return found


def bad_metas(value: Any) -> list[Any]:
    """Every `_meta` below `value` that is neither an object nor null (the kit's META-201)."""
    if isinstance(value, list):
        return [bad for item in value for bad in bad_metas(item)]
    if not isinstance(value, dict):
        return []
    found = [value["_meta"]] if not isinstance(value.get("_meta", {}), dict | None) else []
    return found + [bad for item in value.values() for bad in bad_metas(item)]


def update_problems(update: dict[str, Any]) -> list[str]:
    """What the kit's enum rows (ENUM-202, STATE-203) hold against one update, which the
    schema's open unions let through: its kind, state and stop reason must be the pin's own or
    `_`-prefixed."""
    kind, state, reason = (update.get(k) for k in ("sessionUpdate", "state", "stopReason"))
    found = []
    if kind not in UPDATE_KINDS and not str(kind).startswith("_"):
        found.append(f"an update kind the kit does not know: {update}")
    if kind == "state_update" and state not in ("running", "idle", "requires_action"):
        found.append(f"a state the kit does not know: {update}")
    if reason is not None and reason not in STOP_REASONS and not str(reason).startswith("_"):
        found.append(f"a stop reason the kit does not know: {update}")
    return found


@dataclass
class Turn:
    """One prompt turn as the kit's client saw it."""

    response: dict[str, Any]
    """The `session/prompt` response frame (its receipt, or an error)."""
    updates: list[dict[str, Any]]
    """The `update` of every `session/update` read during the turn, in order."""
    update_sessions: list[str]
    """The `sessionId` of each of those updates."""
    calls: list[dict[str, Any]]
    """The agent's other requests and notifications during the turn."""
    cancel_sent: bool = False
    other_responses: list[dict[str, Any]] = field(default_factory=list)
    """Responses to other requests read during the turn (such as a `session/close`)."""

    @property
    def states(self) -> list[dict[str, Any]]:
        return [u for u in self.updates if u.get("sessionUpdate") == "state_update"]

    @property
    def idle(self) -> dict[str, Any] | None:
        """The idle that ended the turn, if one did."""
        idles = [s for s in self.states if s.get("state") == "idle"]
        return idles[-1] if idles else None

    def kinds(self) -> list[str]:
        return [u["sessionUpdate"] for u in self.updates]


class KitClient:
    """One agent process (`acp-server serve` with `flags`) and the kit's client of it."""

    def __init__(self, sessions_dir: Path, *flags: str, env: dict[str, str] | None = None) -> None:
        self.process = AcpProcess(sessions_dir, *flags, env=env)
        self.process.keep_setup_updates = True
        self.methods: dict[Any, str] = {}
        """The method of every request sent, by id."""
        self.invalid_lines = 0
        """Lines sent that are not requests (each may be answered by one error with id null)."""
        self.unread: list[dict[str, Any]] = []
        """Messages read while waiting for something else, not yet consumed."""
        self._next_id = 0
        self.permission_outcome: dict[str, Any] | None = None
        """The outcome every permission is answered with, instead of the first option (the
        kit's ENUM-203 answers `{"outcome": "_tck/unknown"}`)."""

    def __enter__(self) -> KitClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.close()

    # -- sending --------------------------------------------------------------------------------

    def send_line(self, line: str, *, invalid: int = 0) -> None:
        """A raw line, as given; `invalid` says how many id-less errors it may earn."""
        self.invalid_lines += invalid
        self.process.send_raw(line.encode() + b"\n")

    def send(self, method: str, params: Any = ABSENT, *, id: Any = None) -> Any:
        """Send a request; returns its id (the next integer unless `id` is given)."""
        if id is None:
            self._next_id += 1
            id = self._next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not ABSENT:
            message["params"] = params
        self.methods[id] = method
        self.process.send(message)
        return id

    def notify(self, method: str, params: Any = ABSENT) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not ABSENT:
            message["params"] = params
        self.process.send(message)

    # -- reading --------------------------------------------------------------------------------

    def next_message(self) -> dict[str, Any] | list[dict[str, Any]]:
        """The next message read: an object, or a batch (a JSON array)."""
        if self.unread:
            return self.unread.pop(0)
        value = json.loads(self.process.read_line())
        assert isinstance(value, dict | list), value
        return value

    def response(self, request_id: Any) -> dict[str, Any]:
        """Read until the response to `request_id`; other messages are kept in `unread`."""
        skipped: list[dict[str, Any]] = []
        while True:
            message = self.next_message()
            if (
                isinstance(message, dict)
                and "method" not in message
                and (message.get("id") == request_id)
            ):
                self.unread[:0] = skipped
                return message
            skipped.append(message)  # type: ignore[arg-type]

    def call(self, method: str, params: Any = ABSENT, *, id: Any = None) -> dict[str, Any]:
        """Send a request and return its response frame."""
        return self.response(self.send(method, params, id=id))

    def result(self, method: str, params: Any = ABSENT) -> Any:
        frame = self.call(method, params)
        assert "result" in frame, f"{method} failed: {frame}"
        return frame["result"]

    def initialize(self, **changes: Any) -> dict[str, Any]:
        """The result of the kit's `initialize`, with `changes` to its params."""
        result: dict[str, Any] = self.result("initialize", {**STANDARD_INIT, **changes})
        return result

    def new_session(self, cwd: Path | str, **params: Any) -> str:
        session_id: str = self.result("session/new", {"cwd": str(cwd), **params})["sessionId"]
        return session_id

    def prompt_turn(
        self,
        session_id: str,
        prompt: list[dict[str, Any]],
        *,
        on_running: Callable[[KitClient], None] | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Turn:
        """Run one turn as the kit's `run_prompt` does: until the prompt's response and the
        idle that ends the turn (one with a stop reason, or any after `running`), or an error
        response. `on_running` is called once, when `running` first shows (the kit's cancel)."""
        params: dict[str, Any] = {"sessionId": session_id, "prompt": prompt}
        if meta is not None:
            params["_meta"] = meta
        prompt_id = self.send("session/prompt", params)
        turn = Turn(response={}, updates=[], update_sessions=[], calls=[])
        running = ended = False
        while not (turn.response and (ended or "error" in turn.response)):
            message = self.next_message()
            for frame in message if isinstance(message, list) else [message]:
                if "method" not in frame:
                    if frame.get("id") == prompt_id:
                        turn.response = frame
                    else:
                        turn.other_responses.append(frame)
                    continue
                if frame["method"] == "session/update":
                    update = frame["params"]["update"]
                    turn.updates.append(update)
                    turn.update_sessions.append(frame["params"]["sessionId"])
                    if update.get("sessionUpdate") != "state_update":
                        continue
                    if update.get("state") == "running" and not running:
                        running = True
                        if on_running is not None:
                            turn.cancel_sent = True
                            on_running(self)
                    if update.get("state") == "idle" and ("stopReason" in update or running):
                        ended = True
                    continue
                turn.calls.append(frame)
                if "id" in frame:
                    self._answer(frame, cancelled=turn.cancel_sent)
        return turn

    def _answer(self, request: dict[str, Any], *, cancelled: bool) -> None:
        """The kit's mock client: a permission gets the first option (or `cancelled` once the
        turn was cancelled); anything else is not a method it has."""
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"]}
        if request["method"] == "session/request_permission":
            options = request["params"]["options"]
            outcome: dict[str, Any] = (
                {"outcome": "cancelled"}
                if cancelled
                else {"outcome": "selected", "optionId": options[0]["optionId"]}
            )
            reply["result"] = {"outcome": self.permission_outcome or outcome}
        else:
            reply["error"] = {"code": -32601, "message": "Method not found"}
        self.process.send(reply)

    # -- ending ---------------------------------------------------------------------------------

    def finish(self) -> int:
        """Close stdin, as the kit does at the end of every check; the exit status."""
        return self.process.finish()

    def problems(self) -> list[str]:
        """Everything the kit's transport, schema and envelope checks hold against what the
        agent wrote (call after `finish`)."""
        results, params = _method_definitions()
        found: list[str] = []
        answered: dict[Any, int] = {}
        null_ids = 0
        for raw in self.process.stdout_lines:
            try:
                value = json.loads(raw.decode("utf-8", errors="strict"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                found.append(f"not one JSON message per line ({exc}): {raw[:200]!r}")
                continue
            if isinstance(value, list) and not value:
                found.append("an empty array")
            found += [f"a _meta that is not an object: {raw[:200]!r}" for _ in bad_metas(value)]
            elements = value if isinstance(value, list) else [value]
            for message in elements:
                if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
                    found.append(f"not a JSON-RPC 2.0 object: {message!r}")
                    continue
                method = message.get("method")
                if isinstance(method, str):
                    if method.startswith("_"):
                        continue
                    if method not in CLIENT_METHODS:
                        found.append(f"a method v2 clients do not have: {method}")
                    elif method in params:
                        found += violations_of(params[method], message.get("params"))
                    if method == "session/update":
                        found += update_problems(message["params"]["update"])
                    continue
                request_id = message.get("id")
                if request_id is None:
                    null_ids += 1
                else:
                    answered[request_id] = answered.get(request_id, 0) + 1
                    if request_id not in self.methods:
                        found.append(f"an answer to nothing this client asked: {message}")
                if ("result" in message) == ("error" in message):
                    found.append(f"not exactly one of result and error: {message}")
                elif "error" in message:
                    error = message["error"]
                    text = error.get("message")
                    if not isinstance(error.get("code"), int) or isinstance(error["code"], bool):
                        found.append(f"an error code that is not an integer: {message}")
                    if not isinstance(text, str) or not text or "\n" in text:
                        found.append(f"an error message that is not one line: {message}")
                else:
                    sent = self.methods.get(request_id)
                    if sent in results:
                        found += violations_of(results[sent], message["result"])
        found += [f"{n} answers to request {i!r}" for i, n in answered.items() if n > 1]
        if null_ids > self.invalid_lines:
            found.append(f"{null_ids} answers with id null to {self.invalid_lines} invalid lines")
        return found
