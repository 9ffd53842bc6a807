"""The anyio runner over two peers in one process: both ends of a connection on the same
`Runner`, joined by memory streams (no process, no transport)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import msgspec
import pytest
from anyio.abc import ObjectReceiveStream, ObjectSendStream

from acp_server.jsonrpc.errors import ConnectionClosed, RpcError
from acp_server.jsonrpc.peer import Notification, Peer, Request
from acp_server.jsonrpc.runner import Runner, Then

pytestmark = pytest.mark.anyio

DEADLINE = 5.0
"""Seconds a test waits for something before it fails (a hang, not a timing)."""


class _Sink:
    def __init__(self, send: ObjectSendStream[bytes]) -> None:
        self._send = send

    async def send(self, frame: bytes) -> None:
        await self._send.send(frame)

    async def send_frames(self, frames: Any) -> None:
        for frame in frames:
            await self._send.send(frame)

    def send_nowait(self, frame: bytes) -> None:
        self._send.send_nowait(frame)


class End(Runner):
    """One end: its requests are answered by `handlers` (method -> async params -> result)."""

    def __init__(self, sink: _Sink, first_id: int) -> None:
        super().__init__(sink, Peer(first_id=first_id), shutdown_grace=DEADLINE)
        self.handlers: dict[str, Callable[[Any], Awaitable[Any]]] = {}
        self.notifications: list[tuple[str, Any]] = []

    def request_received(self, request: Request) -> bytes | None:
        handler = self.handlers.get(request.method)
        if handler is None:
            return self.peer.fail(request.id, RpcError("Method not found", code=-32601))
        params = msgspec.json.decode(request.params) if request.params else None
        self.run_request(request.id, request.method, lambda: handler(params))
        return None

    async def notification_received(self, notification: Notification) -> bytes | None:
        params = msgspec.json.decode(notification.params) if notification.params else None
        self.notifications.append((notification.method, params))
        return None


async def _messages(receive: ObjectReceiveStream[bytes]) -> AsyncIterator[bytes]:
    async with receive:
        async for frame in receive:
            yield frame


@asynccontextmanager
async def joined() -> AsyncIterator[tuple[End, End]]:
    a_out, b_in = anyio.create_memory_object_stream[bytes](100)
    b_out, a_in = anyio.create_memory_object_stream[bytes](100)
    a, b = End(_Sink(a_out), 1), End(_Sink(b_out), 100)
    async with anyio.create_task_group() as task_group:
        task_group.start_soon(a.serve, _messages(a_in))
        task_group.start_soon(b.serve, _messages(b_in))
        yield a, b
        a_out.close()
        b_out.close()


async def test_a_request_is_answered_with_its_result() -> None:
    async with joined() as (a, b):

        async def echo(params: Any) -> Any:
            return {"echo": params}

        b.handlers["echo"] = echo
        with anyio.fail_after(DEADLINE):
            raw = await a.call("echo", {"x": [1, "ü"]})
        assert msgspec.json.decode(raw) == {"echo": {"x": [1, "ü"]}}
        assert a.pending_requests == 0


async def test_an_error_answer_raises_the_error() -> None:
    async with joined() as (a, _b):
        with anyio.fail_after(DEADLINE), pytest.raises(RpcError) as caught:
            await a.call("nothing")
        assert (caught.value.code, caught.value.message) == (-32601, "Method not found")


async def test_a_handler_error_is_an_internal_error_without_its_text() -> None:
    async with joined() as (a, b):

        async def boom(params: Any) -> Any:
            raise KeyError("secret detail")

        b.handlers["boom"] = boom
        with anyio.fail_after(DEADLINE), pytest.raises(RpcError) as caught:
            await a.call("boom")
        assert (caught.value.code, caught.value.message) == (-32603, "Internal error")


async def test_on_result_runs_before_the_next_message_is_read() -> None:
    async with joined() as (a, b):
        seen: list[Any] = []

        async def answer_then_notify(params: Any) -> Any:
            b.start_soon(b.notify, "after", 1)
            return 0

        b.handlers["m"] = answer_then_notify
        with anyio.fail_after(DEADLINE):
            await a.call("m", on_result=lambda raw: seen.append(list(a.notifications)))
        assert seen == [[]]


async def test_a_cancelled_caller_cancels_the_other_ends_request() -> None:
    async with joined() as (a, b):
        started, cancelled = anyio.Event(), anyio.Event()

        async def hang(params: Any) -> Any:
            started.set()
            try:
                await anyio.sleep_forever()
            finally:
                cancelled.set()

        b.handlers["hang"] = hang
        with anyio.fail_after(DEADLINE):
            async with anyio.create_task_group() as calls:
                calls.start_soon(a.call, "hang")
                await started.wait()
                assert b.inflight_requests == 1
                calls.cancel_scope.cancel()
            await cancelled.wait()
        assert a.pending_requests == 0


async def test_the_end_of_input_fails_every_waiter() -> None:
    a_out, b_in = anyio.create_memory_object_stream[bytes](100)
    b_out, a_in = anyio.create_memory_object_stream[bytes](100)
    a = End(_Sink(a_out), 1)
    outcome: list[BaseException] = []

    async def ask() -> None:
        try:
            await a.call("never")
        except ConnectionClosed as exc:
            outcome.append(exc)

    with anyio.fail_after(DEADLINE):
        async with anyio.create_task_group() as task_group:
            task_group.start_soon(a.serve, _messages(a_in))
            task_group.start_soon(ask)
            await b_in.receive()  # the request is out
            b_out.close()  # and no answer will come
    assert len(outcome) == 1 and a.closed
    with pytest.raises(ConnectionClosed):
        await a.call("late")
    a_out.close()
    b_in.close()


async def test_a_requests_handler_runs_to_its_first_wait_before_the_next_message_is_read() -> None:
    # A request and a notification read at once (one chunk of input): what the handler does
    # before its first wait (a prompt taking its place in a session's queue) comes before the
    # notification (a `session/cancel` that must find it).
    output, _answers = anyio.create_memory_object_stream[bytes](10)
    end = End(_Sink(output), 100)
    release = anyio.Event()
    seen_at_start: list[list[tuple[str, Any]]] = []

    async def held(params: Any) -> Any:
        seen_at_start.append(list(end.notifications))
        await release.wait()
        return 0

    end.handlers["held"] = held

    async def request_then_notification() -> AsyncIterator[bytes]:
        yield b'{"jsonrpc":"2.0","id":1,"method":"held"}'
        yield b'{"jsonrpc":"2.0","method":"after","params":[2]}'
        release.set()

    with output, _answers, anyio.fail_after(DEADLINE):
        await end.serve(request_then_notification())
    assert seen_at_start == [[]]
    assert end.notifications == [("after", [2])]


class _Closed(_Sink):
    async def send(self, frame: bytes) -> None:
        raise anyio.ClosedResourceError


async def test_an_answer_that_cannot_be_sent_calls_unsent_instead_of_after() -> None:
    output, _answers = anyio.create_memory_object_stream[bytes](10)
    end = End(_Closed(output), 100)
    called: list[str] = []

    async def receipt(params: Any) -> Any:
        return Then(0, lambda: called.append("after"), lambda: called.append("unsent"))

    end.handlers["receipt"] = receipt

    async def one_request() -> AsyncIterator[bytes]:
        yield b'{"jsonrpc":"2.0","id":1,"method":"receipt"}'

    with output, _answers, anyio.fail_after(DEADLINE):
        await end.serve(one_request())
    assert called == ["unsent"]
