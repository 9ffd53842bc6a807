"""JSON-RPC batches (JSON arrays of messages), taken where the peer's `batches` is set (ACP v2
connections): the pure peer's events, then the runner's one array of answers over memory
streams (no process)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import msgspec
import pytest
from anyio.abc import ObjectReceiveStream
from test_jsonrpc_runner import DEADLINE, End, _Sink

from acp_server.jsonrpc.peer import Batch, Invalid, Notification, Peer, Request, Response

NOT_AN_OBJECT = {
    "jsonrpc": "2.0",
    "id": None,
    "error": {"code": -32600, "message": "Invalid request: a batch element must be a JSON object"},
}


def batch_peer() -> Peer:
    peer = Peer()
    peer.batches = True
    return peer


# ---------------------------------------------------------------------------------------------
# The peer.


def test_a_batch_is_each_of_its_messages_as_its_own_event_in_order() -> None:
    peer = batch_peer()
    event = peer.receive(
        b'[{"jsonrpc":"2.0","id":"a","method":"session/list"},'
        b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}]'
    )
    assert isinstance(event, Batch)
    request, notification = event.events
    assert isinstance(request, Request) and (request.id, request.method) == ("a", "session/list")
    assert isinstance(notification, Notification) and notification.method == "session/cancel"
    assert msgspec.json.decode(notification.params) == {"sessionId": "s"}
    assert peer.in_flight("a")


def test_each_element_that_is_no_object_is_an_invalid_request_with_a_null_id() -> None:
    event = batch_peer().receive(b"[17, true, null]")
    assert isinstance(event, Batch)
    assert [json.loads(e.answer) for e in event.events if isinstance(e, Invalid)] == [
        NOT_AN_OBJECT
    ] * 3
    assert len(event.events) == 3


def test_an_empty_array_is_one_invalid_request_even_where_batches_are_taken() -> None:
    event = batch_peer().receive(b"[]")
    assert isinstance(event, Invalid)
    assert json.loads(event.answer) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": "Invalid request: an empty array is not a request"},
    }


def test_a_truncated_batch_is_a_parse_error() -> None:
    event = batch_peer().receive(b'[{"jsonrpc": "2.0", "id": 1, "method": ')
    assert isinstance(event, Invalid)
    assert json.loads(event.answer)["error"]["code"] == -32700


def test_a_peer_that_takes_no_batches_refuses_a_batch_whole() -> None:
    peer = Peer()
    event = peer.receive(b'[{"jsonrpc":"2.0","id":1,"method":"m"}]')
    assert isinstance(event, Invalid)
    assert json.loads(event.answer)["error"]["message"] == (
        "Invalid request: batch requests are not supported"
    )
    assert not peer.in_flight(1)


def test_an_answer_in_a_batch_is_routed_to_our_request() -> None:
    peer = batch_peer()
    request_id, _ = peer.request("session/request_permission", {})
    event = peer.receive(
        b'[{"jsonrpc":"2.0","id":' + str(request_id).encode() + b',"result":{"ok":true}}]'
    )
    assert isinstance(event, Batch)
    (response,) = event.events
    assert isinstance(response, Response) and response.method == "session/request_permission"
    assert peer.pending == 0


def test_a_repeated_id_in_a_batch_is_refused_for_the_second_request() -> None:
    event = batch_peer().receive(
        b'[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":1,"method":"b"}]'
    )
    assert isinstance(event, Batch)
    first, second = event.events
    assert isinstance(first, Request) and first.method == "a"
    assert isinstance(second, Invalid) and json.loads(second.answer)["id"] == 1


# ---------------------------------------------------------------------------------------------
# The runner.


class _Server:
    """A runner taking batches, fed raw lines; its frames are read from `out`."""

    def __init__(self) -> None:
        self._out_send, self.out = anyio.create_memory_object_stream[bytes](100)
        self.end = End(_Sink(self._out_send), 1)
        self.end.peer.batches = True
        self.lines_send, self._lines = anyio.create_memory_object_stream[bytes](100)

    async def frames(self) -> Any:
        async with self._lines:
            async for line in self._lines:
                yield line

    def close(self) -> None:
        for stream in (self._out_send, self.out, self.lines_send, self._lines):
            stream.close()


async def _next(out: ObjectReceiveStream[bytes]) -> Any:
    with anyio.fail_after(DEADLINE):
        return json.loads(await out.receive())


@pytest.mark.anyio
async def test_the_answers_of_a_batch_go_out_as_one_array_once_all_are_answered() -> None:
    server = _Server()
    release = anyio.Event()

    async def slow(params: Any) -> Any:
        await release.wait()
        return "slow"

    async def fast(params: Any) -> Any:
        await server.end.notify("progress", {"from": "fast"})
        release.set()
        return "fast"

    server.end.handlers.update(slow=slow, fast=fast)
    async with anyio.create_task_group() as task_group:
        task_group.start_soon(server.end.serve, server.frames())
        await server.lines_send.send(
            b'[{"jsonrpc":"2.0","id":1,"method":"slow"},{"jsonrpc":"2.0","id":2,"method":"fast"},'
            b'{"jsonrpc":"2.0","id":3,"method":"missing"},17]'
        )
        # The handler's notification streams on its own, before the batch's answers.
        assert await _next(server.out) == {
            "jsonrpc": "2.0",
            "method": "progress",
            "params": {"from": "fast"},
        }
        answers = await _next(server.out)
        server.lines_send.close()
    server.close()
    assert isinstance(answers, list)
    by_id = {answer["id"]: answer for answer in answers if answer["id"] is not None}
    assert by_id == {
        1: {"jsonrpc": "2.0", "id": 1, "result": "slow"},
        2: {"jsonrpc": "2.0", "id": 2, "result": "fast"},
        3: {"jsonrpc": "2.0", "id": 3, "error": {"code": -32601, "message": "Method not found"}},
    }
    assert [answer for answer in answers if answer["id"] is None] == [NOT_AN_OBJECT]


@pytest.mark.anyio
async def test_a_batch_of_notifications_alone_is_answered_by_nothing() -> None:
    server = _Server()

    async def ping(params: Any) -> Any:
        return "pong"

    server.end.handlers["ping"] = ping
    async with anyio.create_task_group() as task_group:
        task_group.start_soon(server.end.serve, server.frames())
        await server.lines_send.send(b'[{"jsonrpc":"2.0","method":"_tck/notify_only"}]')
        await server.lines_send.send(b'{"jsonrpc":"2.0","id":9,"method":"ping"}')
        # The next frame out answers the request sent after the batch.
        assert await _next(server.out) == {"jsonrpc": "2.0", "id": 9, "result": "pong"}
        server.lines_send.close()
    server.close()
    assert server.end.notifications == [("_tck/notify_only", None)]
