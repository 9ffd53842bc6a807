"""What the SDK interop tests share (a test helper): the scenario, and the checks on every frame.

The scenario is the bundled demo recording (`acp_server/recordings/demo/session.jsonl`: a prompt
that calls read_file, todo_write, write_file and run_command, the last two with a permission
request) plus an override that appends one `hang` model call, so that a second prompt streams a
little and then waits to be cancelled. The workspace holds the demo's `hello.py`.

`check_agent_frames` validates every frame the server wrote with the official Python SDK's models
(`acp.schema`): each request's or notification's params against the model of its method, each
result against the model of the request it answers, and each must dump back to exactly what was
sent (a stray, missing or mistyped field fails). The envelope models alone accept anything as
params (their unions end in `Any`), so the per-method check is the one that matters. The history
API's results are checked against the committed JSON Schemas in `schemas/`.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
from acp import schema
from acp_models import AGENT_RESULTS, TO_CLIENT_PARAMS, exact
from acp_process import SETUP_UPDATES

import acp_server
from acp_server.core.replay_script import derive_script, parse_fixture

REPO = Path(__file__).resolve().parent.parent
SCHEMAS = REPO / "schemas"
DEMO = Path(acp_server.__file__).resolve().parent / "recordings" / "demo" / "session.jsonl"

HELLO_BEFORE = 'print("Helo world")\n'
HELLO_AFTER = 'print("Hello, world!")\n'
PROMPT = 'The greeting in hello.py is wrong: it should say "Hello, world!". Can you fix it?'
HANG_TEXT = "Let me double-check the file"
"""What the hanging model call streams before it waits to be cancelled."""

DEMO_TOOL_CALLS = [
    ("call_read_1", "read", "Read hello.py"),
    ("call_plan_1", "think", "Update the plan"),
    ("call_write_1", "edit", "Write hello.py"),
    ("call_run_1", "execute", "Run python3 hello.py"),
    ("call_plan_2", "think", "Update the plan"),
]
"""(toolCallId, kind, title) of the demo's tool calls, in order."""

PARAMS_MODELS = {
    method: TO_CLIENT_PARAMS[method]
    for method in (
        "session/update",
        "session/request_permission",
        "fs/read_text_file",
        "fs/write_text_file",
    )
}
"""What the server may send in this scenario, by method, and the model its params must fit."""


HISTORY_SCHEMAS = {
    "session.page": "session-page.result.schema.json",
    "session.follow": "session-follow.result.schema.json",
}


def build_scenario(root: Path) -> tuple[Path, Path]:
    """The fixture directory (demo + hang override) and the workspace, under `root`."""
    fixture = root / "fixture"
    fixture.mkdir()
    shutil.copyfile(DEMO, fixture / "session.jsonl")
    recorded_calls = len(
        derive_script(parse_fixture(DEMO.name, DEMO.read_bytes().splitlines()).events)
    )
    hang = {
        "kind": "hang",
        "chunks": [
            {"type": "block-start", "index": 0, "blockType": "text"},
            {"type": "text-delta", "index": 0, "text": HANG_TEXT},
        ],
    }
    (fixture / "replay.override.json").write_text(
        json.dumps({"patches": [{"at": recorded_calls, "entry": hang}]})
    )
    workspace = root / "workspace"
    workspace.mkdir()
    (workspace / "hello.py").write_text(HELLO_BEFORE)
    return fixture, workspace


def schema_validator(name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads((SCHEMAS / name).read_text()))


def check_agent_frames(frames: list[dict[str, Any]], methods_by_id: Mapping[Any, str]) -> None:
    """Every frame the agent wrote, in order, fits the ACP model of its method (see the module
    docstring). `methods_by_id` names the client's requests, so results can be matched."""
    history = {method: schema_validator(name) for method, name in HISTORY_SCHEMAS.items()}
    for index, frame in enumerate(frames):
        where = f"frame {index}"
        assert frame.get("jsonrpc") == "2.0", f"{where}: not JSON-RPC 2.0: {frame}"
        body = {k: v for k, v in frame.items() if k != "jsonrpc"}
        if "method" in frame:
            method = frame["method"]
            assert method in PARAMS_MODELS, (
                f"{where}: the server sent an unexpected method: {frame}"
            )
            if "id" in frame:
                schema.AgentRequest.model_validate(body)
            else:
                schema.AgentNotification.model_validate(body)
            exact(PARAMS_MODELS[method], frame.get("params"), f"{where}: the params of {method}")
        elif "error" in frame:
            assert set(body) == {"id", "error"}, f"{where}: {frame}"
            schema.AgentErrorMessage.model_validate(body)
        else:
            assert set(body) == {"id", "result"}, (
                f"{where}: a response must hold id and result: {frame}"
            )
            method = methods_by_id[frame["id"]]
            if method == "session.unfollow":
                assert frame["result"] == {}, f"{where}: session.unfollow answers {{}}: {frame}"
            elif method in history:
                errors = [e.message for e in history[method].iter_errors(frame["result"])]
                assert not errors, (
                    f"{where}: the result of {method} fails {HISTORY_SCHEMAS[method]}: {errors[:3]}"
                )
            else:
                schema.AgentResponseMessage.model_validate(body)
                exact(AGENT_RESULTS[method], frame["result"], f"{where}: the result of {method}")


def check_replay_before_response(
    frames: list[dict[str, Any]], load_id: Any, session_id: str
) -> list[dict[str, Any]]:
    """The `session/update`s of `session_id` in a process that loaded it: all of them strictly
    before the `session/load` response, none after. Returns their `update` payloads, in order.

    The session-setup updates (SPEC 4.4: its mode, options and commands, which a later resume
    sends again) are not replay and are left out."""
    positions = [i for i, f in enumerate(frames) if "method" not in f and f.get("id") == load_id]
    assert len(positions) == 1, (
        f"expected one response to session/load (id {load_id!r}), found {len(positions)}"
    )
    answered = positions[0]
    updates = [
        (i, f["params"]["update"])
        for i, f in enumerate(frames)
        if f.get("method") == "session/update"
        and f["params"]["sessionId"] == session_id
        and f["params"]["update"]["sessionUpdate"] not in SETUP_UPDATES
    ]
    late = [u for i, u in updates if i > answered]
    assert not late, (
        f"{len(late)} replay notification(s) arrived after the session/load response: {late[:2]}"
    )
    assert updates, "session/load replayed nothing"
    return [u for _, u in updates]


def tool_calls(updates: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [
        (u["toolCallId"], u["kind"], u["title"])
        for u in updates
        if u["sessionUpdate"] == "tool_call"
    ]


def final_statuses(updates: list[dict[str, Any]]) -> dict[str, str]:
    statuses: dict[str, str] = {}
    for update in updates:
        if update["sessionUpdate"] in ("tool_call", "tool_call_update") and "status" in update:
            statuses[update["toolCallId"]] = update["status"]
    return statuses


def text_of(updates: list[dict[str, Any]], kind: str = "agent_message_chunk") -> str:
    return "".join(
        u["content"]["text"]
        for u in updates
        if u["sessionUpdate"] == kind and u["content"]["type"] == "text"
    )
