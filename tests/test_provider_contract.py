"""The contract every provider keeps, run over each one: the HTTP providers against their
loopback servers (tests/openai_server.py, tests/anthropic_server.py), llm-replay over a fixture.

Every provider:
- streams a complete answer one chunk per delta, then its usage, then its finish;
- stops at its next read when the stream is cancelled, the chunks given so far standing;
- fails a stream that breaks after chunks once, those chunks standing.

The HTTP providers besides:
- retry a retryable status, a stream cut before its first chunk and a refused connection, after
  the backoff or what the server's retry-after asks, up to `max_retries`, the final message
  counting the attempts; a 4xx, or a wait too long, is not retried; every request and retry of a
  provider goes over one connection;
- fail a cut stream with "stream-cut", naming how many chunks it gave;
- send the key in their key header only, and scrub it from every message that echoes it.

What is particular to one wire (its events, its error bodies, its headers) stays in that
provider's own tests.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic_server as anthropic_wire
import anyio
import msgspec
import openai_server as openai_wire
import pytest
from provider_values import HELLO, Sleeps, Streams, close, end, fin, run, start, td, use
from sse_server import LoopbackServer, Sse, Status

from acp_server.core.stream import TextDelta
from acp_server.providers.anthropic import AnthropicProvider
from acp_server.providers.base import BoundSession, RetryReport
from acp_server.providers.openai import OpenAIProvider
from acp_server.providers.replay import ReplayProvider
from acp_server.providers.sse_provider import SseProvider

pytestmark = pytest.mark.anyio

KEY = "sk-test-7Hq2Zp9Lw4Xc8Vb3Nm6RSECRET"
HEL_LO = ("Hel", "lo")
ANSWER = [start(0, "text"), td(0, "Hel"), td(0, "lo"), end(0), use(10, 5), fin("stop")]
"""What a complete answer of the two deltas "Hel" and "lo" streams, on every wire."""
PACED = tuple(f"{n} " for n in range(60))
"""Deltas that take 12 s at 0.2 s each: longer than the deadline of the cancellation test."""


# ---------------------------------------------------------------------------------------------
# The HTTP providers and their wires.


@dataclass(frozen=True)
class Wire:
    """One HTTP provider's side of the contract: how its server says each thing."""

    name: str
    server: Callable[[], LoopbackServer]
    make: Callable[..., SseProvider]
    """(API root, key, **options) -> the provider."""
    path: str
    """Where a request goes, below the API root."""
    key_header: tuple[str, str]
    """The header that carries `KEY`, as it is sent."""
    preamble: Callable[[], list[Any]]
    """Events that open a stream and give no chunk."""
    deltas: Callable[[tuple[str, ...]], list[Any]]
    """Events of a text block begun with these deltas, unfinished."""
    answer: Callable[[tuple[str, ...]], list[Any]]
    """The events of a whole answer: these deltas, 10 tokens in, 5 out, a plain stop."""
    error: Callable[[str], Any]
    """An error body carrying the API's message."""


def _openai_answer(texts: tuple[str, ...]) -> list[Any]:
    return [
        *_openai_deltas(texts),
        openai_wire.chunk(finish="stop"),
        openai_wire.usage(10, 5),
    ]


def _openai_deltas(texts: tuple[str, ...]) -> list[Any]:
    return [openai_wire.chunk({"role": "assistant", "content": ""}), *map(openai_wire.text, texts)]


def _anthropic_deltas(texts: tuple[str, ...]) -> list[Any]:
    return anthropic_wire.text_block(0, *texts)[:-1]


WIRES = {
    "openai": Wire(
        "openai",
        openai_wire.FakeOpenAI,
        lambda url, key, **options: OpenAIProvider("test-model", url, key, **options),
        "/chat/completions",
        ("Authorization", f"Bearer {KEY}"),
        lambda: [openai_wire.chunk({"role": "assistant", "content": ""})],
        _openai_deltas,
        _openai_answer,
        lambda message: {"error": {"message": message}},
    ),
    "anthropic": Wire(
        "anthropic",
        anthropic_wire.FakeAnthropic,
        lambda url, key, **options: AnthropicProvider("claude-test", url, key, **options),
        "/v1/messages",
        ("x-api-key", KEY),
        lambda: [anthropic_wire.message_start(), anthropic_wire.ping()],
        lambda texts: [anthropic_wire.message_start(), *_anthropic_deltas(texts)],
        lambda texts: anthropic_wire.reply(anthropic_wire.text_block(0, *texts)),
        lambda message: anthropic_wire.error_body("api_error", message),
    ),
}


@dataclass
class Http:
    """An HTTP provider's wire with its server running."""

    wire: Wire
    server: LoopbackServer

    @property
    def url(self) -> str:
        return f"{self.server.base_url}{self.wire.path}"

    def provider(self, sleeps: Sleeps | None = None, **options: Any) -> SseProvider:
        options.setdefault("sleep", sleeps if sleeps is not None else Sleeps())
        return self.wire.make(self.server.base_url, KEY, trust_env=False, **options)

    def failing(self, status: int, message: str, **headers: str) -> Status:
        return Status(status, self.wire.error(message), headers)


@pytest.fixture(params=[pytest.param(name, marks=pytest.mark.process) for name in WIRES])
def http(request: pytest.FixtureRequest) -> Iterator[Http]:
    wire = WIRES[request.param]
    with wire.server() as server:
        yield Http(wire, server)


# ---------------------------------------------------------------------------------------------
# Every provider.


class Subject:
    """A provider of the contract, given what its next model call streams."""

    def answering(self, *texts: str) -> Streams:
        """Streams `texts` as a whole answer (10 tokens in, 5 out, a plain stop)."""
        raise NotImplementedError

    def paced(self, *texts: str) -> Streams:
        """Streams the same, 0.2 s a delta."""
        raise NotImplementedError

    def breaking(self, *texts: str) -> Streams:
        """Streams a text block begun with `texts`, then the stream breaks."""
        raise NotImplementedError


@dataclass
class HttpSubject(Subject):
    http: Http

    def answering(self, *texts: str) -> Streams:
        self.http.server.add(Sse(self.http.wire.answer(texts)))
        return self.http.provider()

    def paced(self, *texts: str) -> Streams:
        self.http.server.add(Sse(self.http.wire.answer(texts), delay=0.2))
        return self.http.provider()

    def breaking(self, *texts: str) -> Streams:
        self.http.server.add(Sse(self.http.wire.deltas(texts), cut=True))
        return self.http.provider()


@dataclass
class ReplaySubject(Subject):
    """llm-replay over a fixture whose script is one override entry."""

    directory: Path

    def answering(self, *texts: str) -> Streams:
        return self._replaying({"kind": "chunks", "chunks": _answer(texts)})

    def paced(self, *texts: str) -> Streams:
        return self._replaying({"kind": "chunks", "chunks": _answer(texts)}, pace_ms=200)

    def breaking(self, *texts: str) -> Streams:
        chunks = [start(0, "text"), *(td(0, t) for t in texts)]
        cut = {"kind": "throw", "chunks": chunks, "message": "cut", "code": "stream-cut"}
        return self._replaying(cut)

    def _replaying(self, entry: dict[str, Any], pace_ms: int = 0) -> ReplayProvider:
        header = {"type": "session", "version": 2, "id": "s1", "createdAt": 0, "cwd": "/work"}
        (self.directory / "session.jsonl").write_text(json.dumps(header) + "\n")
        (self.directory / "replay.override.json").write_text(json.dumps([entry]))
        provider = ReplayProvider.from_path(self.directory, pace_ms=pace_ms)
        provider.bind_session(BoundSession(session_id=HELLO.session_id))
        return provider


def _answer(texts: tuple[str, ...]) -> list[dict[str, Any]]:
    return [start(0, "text"), *(td(0, t) for t in texts), end(0), use(10, 5), fin("stop")]


@pytest.fixture(
    params=[*(pytest.param(name, marks=pytest.mark.process) for name in WIRES), "llm-replay"]
)
def subject(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Subject]:
    if request.param == "llm-replay":
        yield ReplaySubject(tmp_path)
        return
    wire = WIRES[request.param]
    with wire.server() as server:
        yield HttpSubject(Http(wire, server))


async def test_a_complete_answer_streams_each_delta_then_its_usage_then_its_finish(
    subject: Subject,
) -> None:
    chunks, error = await run(subject.answering(*HEL_LO))

    assert error is None
    assert chunks == ANSWER


async def test_cancelling_a_stream_stops_it_at_the_next_read(subject: Subject) -> None:
    provider = subject.paced(*PACED)
    got = []
    # The whole stream would take 12 s: the deadline fails a provider that swallows the
    # cancellation and reads the stream to its end first.
    with anyio.fail_after(10), anyio.CancelScope() as scope:
        async for c in provider.stream(HELLO):
            got.append(msgspec.to_builtins(c))
            if isinstance(c, TextDelta):
                scope.cancel()
    await close(provider)

    assert scope.cancelled_caught
    assert got == [start(0, "text"), td(0, PACED[0])]


async def test_a_stream_that_breaks_after_chunks_fails_once_keeping_them(subject: Subject) -> None:
    chunks, error = await run(subject.breaking("Hal"))

    assert chunks == [start(0, "text"), td(0, "Hal")]
    assert error is not None and error.code == "stream-cut"
    if isinstance(subject, HttpSubject):
        assert error.message.startswith(f"{subject.http.wire.name}: the stream was cut: ")
        assert error.message.endswith(" (after 2 chunks)")
        assert len(subject.http.server.requests) == 1


# ---------------------------------------------------------------------------------------------
# Retries (the HTTP providers).


@pytest.mark.parametrize("status", [429, 503, 529])
async def test_a_retryable_status_is_retried_after_the_backoff_then_streams(
    http: Http, status: int
) -> None:
    failing = http.failing(status, "overloaded")
    http.server.add(failing, failing, Sse(http.wire.answer(HEL_LO)))
    sleeps = Sleeps()

    chunks, error = await run(http.provider(sleeps, retry_base_delay=0.5))

    assert error is None and chunks == ANSWER
    assert sleeps.delays == [0.5, 1.0]
    first, _, third = http.server.requests
    assert third.body == first.body


@pytest.mark.parametrize(
    ("headers", "waited"), [({"retry-after": "7"}, 7.0), ({"retry-after-ms": "250"}, 0.25)]
)
async def test_a_429_waits_what_its_retry_after_asks(
    http: Http, headers: dict[str, str], waited: float
) -> None:
    http.server.add(http.failing(429, "slow down", **headers), Sse(http.wire.answer(HEL_LO)))
    sleeps = Sleeps()

    chunks, error = await run(http.provider(sleeps))

    assert error is None and chunks == ANSWER
    assert sleeps.delays == [waited]


async def test_a_429_asking_for_too_long_a_wait_fails_at_once(http: Http) -> None:
    http.server.add(http.failing(429, "come back later", **{"retry-after": "3600"}))
    sleeps = Sleeps()

    chunks, error = await run(http.provider(sleeps))

    assert chunks == [] and error is not None and sleeps.delays == []
    assert (error.message, error.code) == (
        f"{http.wire.name}: HTTP 429 Too Many Requests from {http.url}: come back later "
        "(the server asked to wait 3600 s: not retried)",
        429,
    )


async def test_each_retry_is_reported_to_the_request_before_its_delay(http: Http) -> None:
    failing = http.failing(503, "overloaded")
    http.server.add(failing, failing, Sse(http.wire.answer(HEL_LO)))
    sleeps = Sleeps()
    reports: list[tuple[RetryReport, int]] = []

    async def on_retry(report: RetryReport) -> None:
        reports.append((report, len(sleeps.delays)))

    request = msgspec.structs.replace(HELLO, on_retry=on_retry)
    chunks, error = await run(http.provider(sleeps, retry_base_delay=0.5), request)

    assert error is None and chunks == ANSWER
    message = f"{http.wire.name}: HTTP 503 Service Unavailable from {http.url}: overloaded"
    assert reports == [
        (RetryReport(message=message, status=503, attempt=2, attempts=4, delay=0.5), 0),
        (RetryReport(message=message, status=503, attempt=3, attempts=4, delay=1.0), 1),
    ]


async def test_retries_give_up_after_max_retries_naming_the_attempts(http: Http) -> None:
    http.server.add(*[http.failing(503, "overloaded")] * 3)
    sleeps = Sleeps()

    chunks, error = await run(http.provider(sleeps, max_retries=2))

    assert chunks == [] and error is not None
    assert (error.message, error.code) == (
        f"{http.wire.name}: HTTP 503 Service Unavailable from {http.url}: overloaded "
        "(after 3 attempts)",
        503,
    )
    assert len(sleeps.delays) == 2 and len(http.server.requests) == 3


async def test_a_4xx_is_not_retried_and_carries_the_servers_message(http: Http) -> None:
    http.server.add(http.failing(400, "max_tokens: too large"))

    chunks, error = await run(http.provider())

    assert chunks == [] and error is not None
    assert (error.message, error.code) == (
        f"{http.wire.name}: HTTP 400 Bad Request from {http.url}: max_tokens: too large",
        400,
    )
    assert len(http.server.requests) == 1


async def test_a_stream_cut_before_any_chunk_is_retried(http: Http) -> None:
    http.server.add(Sse(http.wire.preamble(), cut=True), Sse(http.wire.answer(HEL_LO)))
    sleeps = Sleeps()

    chunks, error = await run(http.provider(sleeps))

    assert error is None and chunks == ANSWER
    assert len(sleeps.delays) == 1


async def test_a_refused_connection_is_retried_then_fails_clearly(http: Http) -> None:
    with socket.socket() as probe:  # a loopback port with nobody listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    root = http.server.base_url.replace(f":{http.server.port}", f":{port}")
    with_credentials = root.replace("http://", "http://user:pass-SECRET@")  # never shown
    p = http.wire.make(with_credentials, None, max_retries=1, sleep=Sleeps(), trust_env=False)

    chunks, error = await run(p)

    assert chunks == [] and error is not None
    assert error.code == "connection-error"
    assert "SECRET" not in error.message
    assert error.message.startswith(f"{http.wire.name}: cannot reach {root}{http.wire.path}: ")
    assert error.message.endswith("(after 2 attempts)")


async def test_a_read_timeout_before_anything_arrives_fails_naming_it(http: Http) -> None:
    http.server.add(Sse(http.wire.answer(HEL_LO), first_delay=0.6))

    chunks, error = await run(http.provider(read_timeout=0.2, max_retries=0))

    assert chunks == [] and error is not None
    assert (error.code, error.message) == (
        "timeout",
        f"{http.wire.name}: the server sent nothing for 0.2 s",
    )


async def test_one_connection_serves_every_request_and_retry_of_a_provider(http: Http) -> None:
    answer = Sse(http.wire.answer(HEL_LO))
    http.server.add(answer, http.failing(503, "overloaded"), answer)
    p = http.provider()

    async for _ in p.stream(HELLO):
        pass
    chunks, error = await run(p)

    assert error is None and chunks == ANSWER
    assert len(http.server.requests) == 3
    assert len({r.peer_port for r in http.server.requests}) == 1


# ---------------------------------------------------------------------------------------------
# The key (the HTTP providers).


async def test_the_key_is_found_nowhere_but_in_its_header(http: Http) -> None:
    http.server.add(Sse(http.wire.answer(HEL_LO)), http.failing(401, f"invalid key {KEY}"))
    p = http.provider()

    async for _ in p.stream(HELLO):
        pass
    chunks, error = await run(p)

    assert chunks == [] and error is not None and error.code == 401
    assert KEY not in error.message and KEY not in repr(p)
    assert error.message.endswith("invalid key [redacted]")
    header, value = http.wire.key_header
    for request in http.server.requests:
        assert request.headers[header] == value
        assert KEY.encode() not in request.raw
        others = {k: v for k, v in request.headers.items() if k.lower() != header.lower()}
        assert not any(KEY in f"{k}: {v}" for k, v in others.items())
