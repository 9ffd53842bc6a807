"""What rendering per connection version costs: a turn's updates through `ConnectionPort`.

In process, a turn's stream as the loop shows it (`--chunks` agent message chunks, then a tool
call announced, run and finished, a plan, usage, and the turn's `state_update`s) goes through
`ConnectionPort.notify` one update at a time, as a turn sends it, to a connection that encodes
each frame as the real one does (`jsonrpc.wire.notification_frame`), over ACP v1 (every update
as it is, the v2-only kinds dropped) and over ACP v2 (each rendered by `core.acp_v2`). The
same stream is also sent straight to the encoder, with no port: the floor.

Each variant runs `--rounds` times (default 5) after one warm-up; the figure is the median
round's nanoseconds per update, and its frames' bytes.

Run from the repository root: `python benchmarks/port_render.py [--chunks N]`. Human-readable
lines go to stderr; stdout gets exactly one line, `PORT_RENDER_RESULT {json}`.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from acp_server.core.acp_updates import (  # noqa: E402
    AgentMessageChunk,
    PlanShown,
    SessionNotification,
    SessionUpdate,
    StateShown,
    ToolCallStarted,
    ToolCallUpdated,
    ToolContent,
    UsageShown,
)
from acp_server.core.content import TextContent  # noqa: E402
from acp_server.core.events import PlanEntry  # noqa: E402
from acp_server.jsonrpc.wire import notification_frame  # noqa: E402
from acp_server.server.port import ConnectionPort  # noqa: E402
from acp_server.server.protocol import ClientCapabilities, ClientSessionCapabilities  # noqa: E402

SESSION = "sess_bench"


class Encoding:
    """A connection that encodes every frame it is given, and counts their bytes."""

    def __init__(self, version: int) -> None:
        self.protocol_version = version
        self.bytes = 0

    async def notify(self, method: str, params: Any) -> None:
        self.bytes += len(notification_frame(method, params))

    async def notify_all(self, method: str, params: Any) -> None:
        for one in params:
            await self.notify(method, one)


class Owner:
    def __init__(self, version: int) -> None:
        self.connection = Encoding(version)
        self.client_capabilities = ClientCapabilities()
        self.client_session_capabilities = ClientSessionCapabilities()


def turn(chunks: int) -> list[SessionNotification]:
    """A turn's stream: its state, its reply chunk by chunk, one tool call, a plan, usage."""
    updates: list[SessionUpdate] = [StateShown("running")]
    words = [f"word{n % 97} " for n in range(chunks)]
    updates += [AgentMessageChunk(TextContent(w), "assistant-0-0") for w in words]
    updates += [
        ToolCallStarted("call_1", "Read a.txt", "read", "pending", {"path": "/w/a.txt"}),
        ToolCallUpdated("call_1", "in_progress", name="read_file"),
        ToolCallUpdated(
            "call_1", "completed", [ToolContent(TextContent("A\n" * 20))], name="read_file"
        ),
        PlanShown([PlanEntry("Read a.txt", "high", "completed")]),
        UsageShown(1200, 200_000),
        StateShown("idle", "end_turn"),
    ]
    return [SessionNotification(SESSION, u) for u in updates]


async def through_port(version: int, stream: list[SessionNotification]) -> tuple[float, int]:
    owner = Owner(version)
    port = ConnectionPort(owner)  # type: ignore[arg-type]  # the attributes it reads
    start = time.perf_counter()
    for note in stream:
        await port.notify("session/update", note)
    return time.perf_counter() - start, owner.connection.bytes


async def straight(stream: list[SessionNotification]) -> tuple[float, int]:
    connection = Encoding(1)
    start = time.perf_counter()
    for note in stream:
        await connection.notify("session/update", note)
    return time.perf_counter() - start, connection.bytes


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000, help="agent message chunks")
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args(argv)
    if options.rounds < 1:
        parser.error("--rounds must be at least 1")
    stream = turn(options.chunks)
    variants = {
        "encode_only": lambda: straight(stream),
        "v1": lambda: through_port(1, stream),
        "v2": lambda: through_port(2, stream),
    }
    result: dict[str, Any] = {"updates": len(stream), "rounds": options.rounds}
    for name, run in variants.items():
        anyio.run(run)  # warm-up
        rounds = [anyio.run(run) for _ in range(options.rounds)]
        seconds = statistics.median(r[0] for r in rounds)
        ns = seconds / len(stream) * 1e9
        result[name] = {"ns_per_update": round(ns, 1), "bytes": rounds[0][1]}
        say(f"{name}: {ns:,.0f} ns per update, {rounds[0][1]:,} bytes")
    floor = result["encode_only"]["ns_per_update"]
    for name in ("v1", "v2"):
        result[name]["over_encode_ns"] = round(result[name]["ns_per_update"] - floor, 1)
    result["python"] = platform.python_version()
    print("PORT_RENDER_RESULT " + json.dumps(result, separators=(",", ":")), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
