"""What the provider tests share (a test helper): chunks as the JSON values they compare, the
request they send, a stream run to its end or its error, and retry waits recorded, not slept."""

from __future__ import annotations

from typing import Any, Protocol

import msgspec

from acp_server.core.content import TextContent
from acp_server.core.messages import UserTurn
from acp_server.core.stream import StreamChunk
from acp_server.providers.base import ModelRequest, ProviderError

HELLO = ModelRequest(session_id="s1", messages=[UserTurn([TextContent("hello")])], tools=[])


class Streams(Protocol):
    def stream(self, request: ModelRequest) -> Any: ...


class Sleeps:
    """Records the waits before retries instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


async def run(
    p: Streams, request: ModelRequest = HELLO
) -> tuple[list[dict[str, Any]], ProviderError | None]:
    """The chunks streamed (as JSON values) and the error that ended the stream, if any; an
    HTTP provider's client is closed afterwards."""
    chunks: list[dict[str, Any]] = []
    try:
        c: StreamChunk
        async for c in p.stream(request):
            chunks.append(msgspec.to_builtins(c))
    except ProviderError as exc:
        return chunks, exc
    finally:
        await close(p)
    return chunks, None


async def close(p: Streams) -> None:
    """Close the provider's HTTP client, if it has one."""
    aclose = getattr(p, "aclose", None)
    if aclose is not None:
        await aclose()


def start(i: int, kind: str) -> dict[str, Any]:
    return {"type": "block-start", "index": i, "blockType": kind}


def end(i: int) -> dict[str, Any]:
    return {"type": "block-end", "index": i}


def td(i: int, t: str) -> dict[str, Any]:
    return {"type": "text-delta", "index": i, "text": t}


def rd(i: int, t: str) -> dict[str, Any]:
    return {"type": "reasoning-delta", "index": i, "text": t}


def cd(i: int, id: str, args: str, name: str | None = None) -> dict[str, Any]:
    value: dict[str, Any] = {
        "type": "tool-call-delta",
        "index": i,
        "id": id,
        "argumentsDelta": args,
    }
    if name is not None:
        value["name"] = name
    return value


def use(inp: int, out: int, cached: int | None = None, **cache: int) -> dict[str, Any]:
    """A usage chunk; `cached` (cachedInputTokens) and any other count by its wire name."""
    if cached is not None:
        cache["cachedInputTokens"] = cached
    return {"type": "usage", "usage": {"inputTokens": inp, "outputTokens": out, **cache}}


def fin(reason: str) -> dict[str, Any]:
    return {"type": "finish", "reason": reason}
