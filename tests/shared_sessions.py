"""Driving many clients of one live session (SPEC 4), whatever carries their frames: the
requests a client starts, what it was shown, and the notices and withdrawn requests it was
sent. Each client is a `ws_server.Peer`, over a WebSocket or an attach relay."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fixtures_builder import Scenario, ToolUse, args, write_fixture
from polling import wait_until
from ws_server import Listening, Peer, listening

LONG = " ".join(f"word{n}" for n in range(120))
"""A reply that takes a while to stream at `--pace-ms 10` (about 400 chunks)."""

WRITE = ToolUse("call_w", "write_file", args(path="a.txt", content="A"))
"""A tool call that asks permission."""

NOTICES = {"session": {"notices": {}}}
"""Client capabilities that advertise `notice` updates."""

USER = ("user_message_chunk", "user-0")
AGENT = ("agent_message_chunk", "assistant-0-0")
"""The keys of `texts` for the first turn's prompt and reply."""

QUEUED = {
    "sessionUpdate": "notice",
    "severity": "info",
    "title": "Prompt queued",
    "description": "It runs when the running turn ends (1 prompt is waiting).",
}
"""The notice every attached client is sent when one prompt waits for the running turn."""


@contextmanager
def serving(tmp_path: Path, scenario: Scenario, *flags: str) -> Iterator[Listening]:
    """`serve --listen` replaying `scenario`, slowed to 10 ms a chunk, with `flags` added."""
    fixture = write_fixture(tmp_path / "fixture", scenario)
    with listening(
        tmp_path / "sessions", "--replay", str(fixture), "--pace-ms", "10", *flags
    ) as server:
        yield server


def client(server: Listening, capabilities: dict[str, Any] | None = None) -> Peer:
    """A WebSocket client of `server`, initialized with `capabilities`."""
    peer = server.connect()
    peer.request("initialize", {"protocolVersion": 1, "clientCapabilities": capabilities or {}})
    return peer


def new_session(peer: Peer, workspace: Path) -> str:
    session_id: str = peer.request("session/new", {"cwd": str(workspace), "mcpServers": []})[
        "sessionId"
    ]
    return session_id


def load(peer: Peer, session_id: str, workspace: Path) -> int:
    """Start a `session/load`; its request id."""
    return peer.start(
        "session/load", {"sessionId": session_id, "cwd": str(workspace), "mcpServers": []}
    )


def prompt(peer: Peer, session_id: str, text: str) -> int:
    return peer.start(
        "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    )


def updates(peer: Peer) -> list[dict[str, Any]]:
    return [n["params"]["update"] for n in peer.notifications if n["method"] == "session/update"]


def texts(shown: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """The text of each message shown, by (kind, messageId), its chunks joined in order."""
    joined: dict[tuple[str, str], str] = {}
    for update in shown:
        kind = update["sessionUpdate"]
        if kind in ("user_message_chunk", "agent_message_chunk", "agent_thought_chunk"):
            key = (kind, update.get("messageId", ""))
            joined[key] = joined.get(key, "") + update["content"]["text"]
    return joined


def read_until(peer: Peer, done: Any, what: str) -> None:
    """Read `peer`'s frames until `done()` holds (at once if it already does)."""
    wait_until(lambda: done() or (bool(peer.frame()) and done()), what)


def log_types(peer: Peer, session_id: str) -> list[str]:
    return [e["type"] for e in peer.events(session_id)]


def queued_notices(peer: Peer) -> list[dict[str, Any]]:
    return [u for u in updates(peer) if u["sessionUpdate"] == "notice"]


def withdrawn(peer: Peer) -> list[Any]:
    """The params of the `$/cancel_request` notifications `peer` was sent."""
    return [n["params"] for n in peer.notifications if n["method"] == "$/cancel_request"]
