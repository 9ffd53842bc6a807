"""Anthropic stream decoding throughput: chunks per second from one streamed Messages response.

A loopback HTTP server (a thread of this process) serves one precomputed response: the
`message_start`, `content_block_start` ... `message_stop` events of one text block of
`--chunks` `text_delta` events (fragments of 1 to 8 characters, from a fixed seed), written in
64 KiB pieces of a chunked body, as the API frames its events (`event:` and `data:` lines).
Each variant reads the whole response and counts what it got:

- `provider`: `AnthropicProvider.stream` as the server runs it (httpx, this package's
  `SseDecoder`, `EventMapper`): `StreamChunk`s out;
- `httpx-sse`: the same HTTP client and `EventMapper`, with `httpx_sse.EventSource` decoding
  the events instead of `SseDecoder`;
- `sdk`: the official `anthropic` SDK's `messages.create(stream=True)`, iterating its typed
  events (no mapping onto chunks at all: a bound on what a provider built on it could reach).

A variant whose library is not installed is reported as null. Each variant runs `--rounds`
times (default 5) after one warm-up; the figure is the median round's chunks per second, where
a round's chunk count is the number of text deltas (the same for every variant).

Run from the repository root: `python benchmarks/anthropic_stream.py [--chunks N]`. Human-
readable lines go to stderr; stdout gets exactly one line, `ANTHROPIC_STREAM_RESULT {json}`.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from acp_server.core.content import TextContent  # noqa: E402
from acp_server.core.messages import UserTurn  # noqa: E402
from acp_server.core.stream import TextDelta  # noqa: E402
from acp_server.providers.anthropic import AnthropicProvider  # noqa: E402
from acp_server.providers.anthropic_stream import EventMapper  # noqa: E402
from acp_server.providers.base import ModelRequest  # noqa: E402

WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "with",
    "was",
    "on",
    "be",
    "at",
    "by",
    "this",
    "had",
    "not",
    "are",
    "but",
    "from",
]


def fragments(count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    text = " ".join(rng.choice(WORDS) for _ in range(count * 2))
    out, position = [], 0
    for _ in range(count):
        size = rng.randint(1, 8)
        out.append(text[position : position + size] or "x")
        position += size
    return out


def body(count: int) -> bytes:
    def event(value: dict[str, Any]) -> str:
        return f"event: {value['type']}\ndata: {json.dumps(value, separators=(',', ':'))}\n\n"

    parts = [
        event({"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": [], "model": "m", "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        event({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        *(event({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": f}}) for f in fragments(count)),
        event({"type": "content_block_stop", "index": 0}),
        event({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": count}}),
        event({"type": "message_stop"}),
    ]  # fmt: skip
    return "".join(parts).encode()


def serve(payload: bytes) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for start in range(0, len(payload), 65536):
                piece = payload[start : start + 65536]
                self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


REQUEST = ModelRequest(session_id="b", messages=[UserTurn([TextContent("go")])], tools=[])


async def run_provider(base_url: str) -> int:
    provider = AnthropicProvider("m", base_url, "k", trust_env=False)  # type: ignore[arg-type]
    count = 0
    async for chunk in provider.stream(REQUEST):
        if type(chunk) is TextDelta:
            count += 1
    await provider.aclose()
    return count


async def run_httpx_sse(base_url: str) -> int:
    from httpx_sse import EventSource

    mapper = EventMapper()
    count = 0
    async with (
        httpx.AsyncClient(trust_env=False) as client,
        client.stream("POST", f"{base_url}/v1/messages", json={}) as response,
    ):
        async for sse in EventSource(response).aiter_sse():
            for chunk in mapper.event(sse.data):
                if type(chunk) is TextDelta:
                    count += 1
    return count


async def run_sdk(base_url: str) -> int:
    import anthropic

    client = anthropic.AsyncAnthropic(api_key="k", base_url=base_url, max_retries=0)
    count = 0
    stream = await client.messages.create(
        model="m", max_tokens=10, messages=[{"role": "user", "content": "go"}], stream=True
    )
    async for event in stream:
        if event.type == "content_block_delta" and event.delta.type == "text_delta":
            count += 1
    await client.close()
    return count


VARIANTS: dict[str, tuple[str | None, Callable[[str], Awaitable[int]]]] = {
    "provider": (None, run_provider),
    "httpx-sse": ("httpx_sse", run_httpx_sse),
    "sdk": ("anthropic", run_sdk),
}


def installed(module: str | None) -> bool:
    if module is None:
        return True
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    server = serve(body(args.chunks))
    base_url = f"http://127.0.0.1:{server.server_address[1]}"
    results: dict[str, Any] = {}
    for name, (module, variant) in VARIANTS.items():
        if not installed(module):
            results[name] = None
            print(f"{name}: not installed", file=sys.stderr)
            continue
        rates = []
        for round_number in range(args.rounds + 1):
            started = time.perf_counter()
            count = anyio.run(variant, base_url)
            elapsed = time.perf_counter() - started
            if count != args.chunks:
                raise SystemExit(f"{name}: {count} text deltas, expected {args.chunks}")
            if round_number:  # the first round warms up
                rates.append(count / elapsed)
        median = statistics.median(rates)
        results[name] = {"chunks_per_s": round(median), "rounds": [round(r) for r in rates]}
        print(f"{name}: {median:,.0f} chunks/s (median of {args.rounds})", file=sys.stderr)
    server.shutdown()
    versions = {}
    for module in ("httpx", "httpx_sse", "anthropic"):
        try:
            versions[module] = getattr(__import__(module), "__version__", "?")
        except ImportError:
            versions[module] = None
    print(
        "ANTHROPIC_STREAM_RESULT "
        + json.dumps(
            {
                "chunks": args.chunks,
                "variants": results,
                "versions": versions,
                "python": platform.python_version(),
            },
            separators=(",", ":"),
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
