"""The JSON-RPC connection in-process, over memory streams: concurrency, `$/cancel_request`,
outbound requests routed by id, ordering of frames, shutdown, and the error table."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import msgspec
import pytest
from anyio import wait_all_tasks_blocked
from anyio.abc import ObjectReceiveStream, ObjectSendStream

from acp_server.core.ids import InvalidSessionId
from acp_server.jsonrpc.errors import ErrorObject
from acp_server.providers.replay import ReplayProvider, bundled_demo_fixture
from acp_server.server.agent import AcpAgent
from acp_server.server.errors import (
    ClientError,
    ConnectionClosed,
    InvalidParams,
    SessionUnreadable,
    UnknownSession,
    to_rpc_error,
)
from acp_server.server.listing import (
    ListEntry,
    decode_cursor,
    encode_cursor,
    iso_time,
    select_page,
)
from acp_server.server.rpc import Connection, Dispatched, dispatched
from acp_server.server.sessions import SessionRegistry
from acp_server.storage.errors import CorruptLog, LogLocked, SessionNotFound, UnsupportedVersion
from acp_server.storage.jsonl.store import JsonlStore
from acp_server.transports.stdio import lines

pytestmark = pytest.mark.anyio

FRAME_DEADLINE = 5.0
"""Seconds a test waits for the server's next frame before it fails (a hang, not a timing)."""


class Peer:
    """The client end of an in-process connection: writes lines in, reads frames out."""

    def __init__(
        self,
        connection: Connection,
        inbound: ObjectSendStream[bytes],
        outbound: ObjectReceiveStream[bytes],
    ) -> None:
        self.connection = connection
        self._inbound = inbound
        self._outbound = outbound

    async def send(self, message: Any) -> None:
        await self._inbound.send(json.dumps(message).encode() + b"\n")

    async def frame(self) -> dict[str, Any]:
        with anyio.fail_after(FRAME_DEADLINE):
            raw = await self._outbound.receive()
        assert b"\n" not in raw  # one message, which the transport frames
        frame = json.loads(raw)
        assert isinstance(frame, dict)
        return frame

    async def silent(self) -> None:
        """Nothing was written: every task is blocked, waiting for input, and no frame is out."""
        await wait_all_tasks_blocked()
        with pytest.raises(anyio.WouldBlock):
            self._outbound.receive_nowait()

    async def close(self) -> None:
        await self._inbound.aclose()


class StreamSource:
    def __init__(self, receive: ObjectReceiveStream[bytes]) -> None:
        self._receive = receive

    async def read(self) -> bytes:
        try:
            return await self._receive.receive()
        except anyio.EndOfStream:
            return b""


@asynccontextmanager
async def connected(
    setup: Callable[[Connection], None], *, grace: float = 5.0
) -> AsyncIterator[Peer]:
    out_send, out_receive = anyio.create_memory_object_stream[bytes](100)
    in_send, in_receive = anyio.create_memory_object_stream[bytes](100)
    connection = Connection(out_send, shutdown_grace=grace)
    setup(connection)
    async with out_send, out_receive, in_send, in_receive, anyio.create_task_group() as tg:
        tg.start_soon(connection.serve, lines(StreamSource(in_receive)))
        peer = Peer(connection, in_send, out_receive)
        yield peer
        await peer.close()


def request(id: Any, method: str, params: Any = None) -> dict[str, Any]:
    message = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        message["params"] = params
    return message


# ---------------------------------------------------------------------------------------------
# Dispatch and concurrency.


async def test_a_slow_request_does_not_block_the_others() -> None:
    release = anyio.Event()

    async def slow(params: Any) -> Any:
        await release.wait()
        return {"slow": params}

    async def fast(params: Any) -> Any:
        return {"fast": params}

    def setup(connection: Connection) -> None:
        connection.route("slow", slow)
        connection.route("fast", fast)

    async with connected(setup) as peer:
        await peer.send(request(1, "slow", {"n": 1}))
        await peer.send(request(2, "fast", {"n": 2}))
        assert await peer.frame() == {"jsonrpc": "2.0", "id": 2, "result": {"fast": {"n": 2}}}
        assert peer.connection.inflight_requests == 1
        release.set()
        assert await peer.frame() == {"jsonrpc": "2.0", "id": 1, "result": {"slow": {"n": 1}}}


async def test_params_arrive_as_one_value_whatever_their_keys() -> None:
    seen: list[Any] = []

    async def record(params: Any) -> Any:
        seen.append(params)
        return None

    async with connected(lambda c: c.route("m", record)) as peer:
        await peer.send(request(1, "m", {"_meta": {"params": 1}, "self": 2, "params": 3}))
        await peer.send(request(2, "m", [1, 2]))
        await peer.send(request(3, "m"))
        await peer.send({"jsonrpc": "2.0", "id": 4, "method": "m", "params": None})
        for n in (1, 2, 3, 4):
            assert await peer.frame() == {"jsonrpc": "2.0", "id": n, "result": None}
    assert seen == [{"_meta": {"params": 1}, "self": 2, "params": 3}, [1, 2], None, None]


async def test_cancel_request_answers_32800() -> None:
    started = anyio.Event()
    cleaned_up = anyio.Event()

    async def hang(params: Any) -> Any:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            cleaned_up.set()

    async with connected(lambda c: c.route("hang", hang)) as peer:
        await peer.send(request("r1", "hang", {}))
        await started.wait()
        await peer.send(
            {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": "r1"}}
        )
        assert await peer.frame() == {
            "jsonrpc": "2.0",
            "id": "r1",
            "error": {"code": -32800, "message": "Request cancelled"},
        }
        assert cleaned_up.is_set()
        assert peer.connection.inflight_requests == 0
        # The id is free again.
        assert not peer.connection.cancel_request("r1")


async def test_a_duplicate_in_flight_id_is_refused() -> None:
    release = anyio.Event()

    async def wait(params: Any) -> Any:
        await release.wait()
        return "done"

    async with connected(lambda c: c.route("wait", wait)) as peer:
        await peer.send(request(7, "wait"))
        await wait_all_tasks_blocked()  # the first request is in flight, waiting for release
        await peer.send(request(7, "wait"))
        assert await peer.frame() == {
            "jsonrpc": "2.0",
            "id": 7,
            "error": {
                "code": -32600,
                "message": "Invalid request: a request with this id is still in flight",
            },
        }
        release.set()
        assert await peer.frame() == {"jsonrpc": "2.0", "id": 7, "result": "done"}


async def test_handler_errors_go_through_the_table(caplog: pytest.LogCaptureFixture) -> None:
    async def boom(params: Any) -> Any:
        raise RuntimeError("secret path /home/me/.ssh/id_rsa")

    async def typed(params: Any) -> Any:
        return msgspec.convert(params, dict[str, int])

    def sync_unknown(params: Any) -> Any:
        raise UnknownSession("abc")

    def setup(connection: Connection) -> None:
        connection.route("boom", boom)
        connection.route("typed", typed)
        connection.route("sync", sync_unknown)

    with caplog.at_level(logging.ERROR, logger="acp_server.server.errors"):
        async with connected(setup) as peer:
            await peer.send(request(1, "boom"))
            frame = await peer.frame()
            assert frame == {
                "jsonrpc": "2.0",
                "id": 1,
                "error": {"code": -32603, "message": "Internal error while handling boom"},
            }
            await peer.send(request(2, "typed", {"a": "x"}))
            assert await peer.frame() == {
                "jsonrpc": "2.0",
                "id": 2,
                "error": {
                    "code": -32602,
                    "message": "Invalid params: Expected `int`, got `str` - at `$[...]`",
                    "data": {"path": "$[...]"},
                },
            }
            await peer.send(request(3, "sync"))
            assert await peer.frame() == {
                "jsonrpc": "2.0",
                "id": 3,
                "error": {
                    "code": -32002,
                    "message": "Unknown session: abc",
                    "data": {"sessionId": "abc"},
                },
            }
    # The internal error's text and traceback went to the log, not the wire.
    assert "secret path" in caplog.text and "Traceback" in caplog.text


async def test_notifications_run_in_order_and_errors_are_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[Any] = []

    def note(params: Any) -> None:
        if params == {"fail": True}:
            raise ValueError("bad note")
        seen.append(params)

    with caplog.at_level(logging.WARNING, logger="acp_server.server.rpc"):
        async with connected(lambda c: c.route_notification("note", note)) as peer:
            for n in range(5):
                await peer.send({"jsonrpc": "2.0", "method": "note", "params": [n]})
            await peer.send({"jsonrpc": "2.0", "method": "note", "params": {"fail": True}})
            await peer.send({"jsonrpc": "2.0", "method": "nobody", "params": {}})
            await peer.silent()
    assert seen == [[0], [1], [2], [3], [4]]
    assert "notification note failed: Internal error while handling note" in caplog.text


async def test_notifications_before_a_response_are_written_before_it() -> None:
    async def chatty(params: Any) -> Any:
        connection = holder[0]
        for n in range(20):
            await connection.notify("session/update", {"n": n})
            if n % 5 == 0:
                await anyio.lowlevel.checkpoint()
        return "end"

    holder: list[Connection] = []

    def setup(connection: Connection) -> None:
        holder.append(connection)
        connection.route("chatty", chatty)

    async with connected(setup) as peer:
        await peer.send(request(1, "chatty"))
        frames = [await peer.frame() for _ in range(21)]
    assert frames[:20] == [
        {"jsonrpc": "2.0", "method": "session/update", "params": {"n": n}} for n in range(20)
    ]
    assert frames[20] == {"jsonrpc": "2.0", "id": 1, "result": "end"}


async def test_end_of_input_waits_for_running_requests_then_cancels_them() -> None:
    release = anyio.Event()
    finished = anyio.Event()

    async def short(params: Any) -> Any:
        await release.wait()
        finished.set()
        return "short"

    async def forever(params: Any) -> Any:
        await anyio.sleep_forever()

    def setup(connection: Connection) -> None:
        connection.route("short", short)
        connection.route("forever", forever)

    async with connected(setup, grace=2) as peer:
        await peer.send(request(1, "short"))
        await peer.send(request(2, "forever"))
        await peer.close()
        # Both requests outlive the end of input; the short one finishes within the grace.
        await wait_all_tasks_blocked()
        assert not finished.is_set()
        release.set()
        frames = [await peer.frame(), await peer.frame()]
    assert frames == [
        {"jsonrpc": "2.0", "id": 1, "result": "short"},
        {"jsonrpc": "2.0", "id": 2, "error": {"code": -32800, "message": "Request cancelled"}},
    ]
    assert finished.is_set()


async def test_end_of_input_cancels_background_work_after_the_grace() -> None:
    holder: list[Connection] = []
    cancelled = anyio.Event()

    async def stuck() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()

    with anyio.fail_after(FRAME_DEADLINE):
        async with connected(holder.append, grace=0.1) as peer:
            await wait_all_tasks_blocked()  # serving
            holder[0].start_soon(stuck)
            await peer.close()
    assert cancelled.is_set()


async def test_background_work_whose_client_went_ends_and_the_connection_serves_on() -> None:
    holder: list[Connection] = []

    async def sends_to_a_gone_client() -> None:
        raise anyio.BrokenResourceError

    def setup(connection: Connection) -> None:
        holder.append(connection)
        connection.route("ping", lambda params: "pong")

    async with connected(setup) as peer:
        await wait_all_tasks_blocked()  # serving
        holder[0].start_soon(sends_to_a_gone_client)
        await wait_all_tasks_blocked()
        await peer.send(request(1, "ping"))
        assert await peer.frame() == {"jsonrpc": "2.0", "id": 1, "result": "pong"}


async def test_an_answer_that_cannot_be_sent_ends_the_connection_as_the_end_of_input() -> None:
    out_send, out_receive = anyio.create_memory_object_stream[bytes](100)
    in_send, in_receive = anyio.create_memory_object_stream[bytes](100)
    connection = Connection(out_send)
    connection.route("ping", lambda params: "pong")
    await out_receive.aclose()  # the client went: nothing can reach it
    async with out_send, in_send, in_receive:
        await in_send.send(json.dumps(request(1, "ping")).encode() + b"\n")
        with anyio.fail_after(FRAME_DEADLINE):
            await connection.serve(lines(StreamSource(in_receive)))
    assert connection.closed


# ---------------------------------------------------------------------------------------------
# Outbound requests.


class ReadResult(msgspec.Struct):
    content: str


async def test_outbound_request_gets_its_response_by_id() -> None:
    holder: list[Connection] = []
    async with connected(holder.append) as peer:
        connection = holder[0]
        results: dict[str, Any] = {}

        async def ask(name: str, path: str) -> None:
            results[name] = await connection.request(
                "fs/read_text_file", {"path": path}, ReadResult
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, "a", "/a")
            first = await peer.frame()
            tg.start_soon(ask, "b", "/b")
            second = await peer.frame()
            assert first == {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "fs/read_text_file",
                "params": {"path": "/a"},
            }
            assert second == {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "fs/read_text_file",
                "params": {"path": "/b"},
            }
            assert connection.pending_requests == 2
            # Answered out of order; each goes to its own caller.
            await peer.send({"jsonrpc": "2.0", "id": 1, "result": {"content": "B"}})
            await peer.send({"jsonrpc": "2.0", "id": 0, "result": {"content": "A"}})
        assert results == {"a": ReadResult("A"), "b": ReadResult("B")}
        assert connection.pending_requests == 0


async def test_outbound_error_raises_client_error() -> None:
    holder: list[Connection] = []
    async with connected(holder.append) as peer:
        connection = holder[0]
        async with anyio.create_task_group() as tg:
            errors: list[ClientError] = []

            async def ask() -> None:
                with pytest.raises(ClientError) as caught:
                    await connection.request("terminal/create", {"command": "ls"})
                errors.append(caught.value)

            tg.start_soon(ask)
            sent = await peer.frame()
            await peer.send(
                {
                    "jsonrpc": "2.0",
                    "id": sent["id"],
                    "error": {"code": -32000, "message": "no", "data": {"why": 1}},
                }
            )
        (error,) = errors
        assert (error.method, error.code, error.message, error.data) == (
            "terminal/create",
            -32000,
            "no",
            {"why": 1},
        )


async def test_unknown_and_duplicate_responses_are_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    holder: list[Connection] = []
    with caplog.at_level(logging.WARNING, logger="acp_server.server.rpc"):
        async with connected(holder.append) as peer:
            connection = holder[0]
            async with anyio.create_task_group() as tg:
                got: list[Any] = []

                async def ask() -> None:
                    got.append(await connection.request("x"))

                tg.start_soon(ask)
                sent = await peer.frame()
                assert sent == {"jsonrpc": "2.0", "id": 0, "method": "x"}
                await peer.send({"jsonrpc": "2.0", "id": 0, "result": 1})
                await peer.send({"jsonrpc": "2.0", "id": 0, "result": 2})  # duplicate
                await peer.send({"jsonrpc": "2.0", "id": 55, "result": 3})  # unknown
                await peer.send({"jsonrpc": "2.0", "id": "0", "result": 4})  # not our kind of id
            await peer.silent()
            assert got == [1]
    assert caplog.text.count("dropped a response to request id") == 3


async def test_a_cancelled_waiter_leaves_nothing_behind(caplog: pytest.LogCaptureFixture) -> None:
    holder: list[Connection] = []
    async with connected(holder.append) as peer:
        connection = holder[0]
        with anyio.move_on_after(0.05) as scope:
            await connection.request("session/request_permission", {"sessionId": "s"})
        assert scope.cancelled_caught
        assert connection.pending_requests == 0
        assert await peer.frame() == {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "session/request_permission",
            "params": {"sessionId": "s"},
        }
        # The client is told, and its late answer is dropped.
        assert await peer.frame() == {
            "jsonrpc": "2.0",
            "method": "$/cancel_request",
            "params": {"requestId": 0},
        }
        with caplog.at_level(logging.WARNING, logger="acp_server.server.rpc"):
            await peer.send(
                {"jsonrpc": "2.0", "id": 0, "result": {"outcome": {"outcome": "cancelled"}}}
            )
            await peer.silent()
        assert "dropped a response to request id 0" in caplog.text


async def test_end_of_input_fails_waiters_and_later_requests() -> None:
    holder: list[Connection] = []
    async with connected(holder.append) as peer:
        connection = holder[0]
        outcome: list[BaseException] = []

        async def ask() -> None:
            try:
                await connection.request("fs/write_text_file", {})
            except ConnectionClosed as exc:
                outcome.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            await peer.frame()
            await peer.close()
        assert len(outcome) == 1 and connection.pending_requests == 0
        with pytest.raises(ConnectionClosed):
            await connection.request("fs/read_text_file", {})


def test_error_table() -> None:
    assert (
        to_rpc_error(InvalidSessionId("bad id")).to_wire()
        == InvalidParams(
            "Invalid params: bad id - at `$.sessionId`", {"path": "$.sessionId"}
        ).to_wire()
    )
    assert (
        to_rpc_error(SessionNotFound("unknown session 'abc'")).to_wire()
        == UnknownSession("abc").to_wire()
    )
    corrupt = to_rpc_error(CorruptLog("/r/x/session.jsonl", 7, "bad row"))
    assert isinstance(corrupt, SessionUnreadable)
    assert (corrupt.code, corrupt.message, corrupt.data) == (
        -32010,
        "Session log unreadable: line 7: bad row",
        {"reason": "corrupt", "line": 7, "detail": "bad row"},
    )
    unsupported = to_rpc_error(UnsupportedVersion("/p", 999))
    assert unsupported.data == {"reason": "unsupported-version", "found": 999, "supported": 2}
    locked = to_rpc_error(LogLocked("held"))
    assert (locked.code, locked.data) == (-32011, {"reason": "locked"})
    internal = to_rpc_error(KeyError("internal detail"), "m")
    assert (internal.code, internal.message, internal.data) == (
        -32603,
        "Internal error while handling m",
        msgspec.UNSET,
    )


def test_an_error_message_is_cut_to_1000_characters_keeping_the_field_it_names() -> None:
    text = "Object contains unknown field `" + "k" * 5000 + "` - at `$.params`"
    error = to_rpc_error(msgspec.ValidationError(text))
    message = "Invalid params: " + text
    assert (error.message, error.data) == (
        message[:897] + "..." + message[-100:],
        {"path": "$.params"},
    )
    assert len(error.message) == 1000 and error.message.endswith("k` - at `$.params`")


def test_cursor_round_trip_and_garbage() -> None:
    entry = ListEntry("abc", 1_700_000_000_000, "/w")
    assert decode_cursor(encode_cursor(entry)) == (1_700_000_000_000, "abc")
    for garbage in ["", "!!!", "bnVsbA", "WzEsMl0", "eyJhIjoxfQ"]:
        with pytest.raises(InvalidParams):
            decode_cursor(garbage)


def test_select_page_orders_newest_first_and_filters() -> None:
    entries = [ListEntry(f"s{n}", n // 2, "/a" if n % 3 else "/b") for n in range(10)]
    page, more = select_page(entries, cwd=None, after=None, page_size=4)
    assert [e.session_id for e in page] == ["s9", "s8", "s7", "s6"] and more
    page, more = select_page(entries, cwd=None, after=(3, "s6"), page_size=4)
    assert [e.session_id for e in page] == ["s5", "s4", "s3", "s2"] and more
    page, more = select_page(entries, cwd="/b/.", after=None, page_size=10)
    assert [e.session_id for e in page] == ["s9", "s6", "s3", "s0"] and not more


def test_iso_time() -> None:
    assert iso_time(0) == "1970-01-01T00:00:00.000Z"
    assert iso_time(1_700_000_101_234) == "2023-11-14T22:15:01.234Z"


async def test_the_agent_port_reaches_the_client_with_its_capabilities(tmp_path: Path) -> None:
    from acp_server.agent.ports import ClientCapabilities as PortCapabilities
    from acp_server.agent.ports import ClientRequestError

    holder: list[AcpAgent] = []

    def setup(connection: Connection) -> None:
        agent = AcpAgent(
            connection,
            SessionRegistry(JsonlStore(tmp_path)),
            ReplayProvider.from_path(bundled_demo_fixture()),
        )
        agent.install()
        holder.append(agent)

    async with connected(setup) as peer:
        port = holder[0].port
        assert port.capabilities == PortCapabilities()
        await peer.send(
            request(
                1,
                "initialize",
                {
                    "protocolVersion": 1,
                    "clientCapabilities": {"fs": {"writeTextFile": True}, "terminal": True},
                },
            )
        )
        assert (await peer.frame())["id"] == 1
        assert port.capabilities == PortCapabilities(
            read_text_file=False, write_text_file=True, terminal=True
        )
        async with anyio.create_task_group() as tg:
            results: list[Any] = []

            async def use() -> None:
                await port.notify("session/update", {"sessionId": "s", "update": {}})
                results.append(await port.request("fs/read_text_file", {"path": "/x"}))
                with pytest.raises(ClientRequestError):
                    await port.request("fs/read_text_file", {"path": "/y"})

            tg.start_soon(use)
            assert await peer.frame() == {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {"sessionId": "s", "update": {}},
            }
            first = await peer.frame()
            await peer.send({"jsonrpc": "2.0", "id": first["id"], "result": {"content": "text"}})
            second = await peer.frame()
            await peer.send(
                {
                    "jsonrpc": "2.0",
                    "id": second["id"],
                    "error": {"code": -32002, "message": "no file"},
                }
            )
        assert results == [{"content": "text"}]


async def test_closing_a_session_cancels_its_work_and_waits_for_it(tmp_path: Path) -> None:
    registry = SessionRegistry(JsonlStore(tmp_path))
    session = await registry.create(
        "/w", additional_directories=msgspec.UNSET, mcp_servers=msgspec.UNSET
    )
    steps: list[str] = []

    running = anyio.CancelScope()
    session.turn = running  # type: ignore[assignment]  # what closing needs of a Turn: cancel()

    async def turn() -> None:
        with session.activity():
            with running:
                await anyio.sleep_forever()
            steps.append("cancelled")
            await anyio.lowlevel.checkpoint()  # e.g. logging the turn's end
            steps.append("logged")

    async with anyio.create_task_group() as tg:
        tg.start_soon(turn)
        await wait_all_tasks_blocked()  # the turn is running, in its cancellable part
        await registry.close(session.id)
        steps.append("closed")
    assert steps == ["cancelled", "logged", "closed"]
    assert session.writer.closed and registry.live == {}


def test_a_dispatched_error_without_data_is_read_back_with_data_unset() -> None:
    response = {"jsonrpc": "2.0", "error": {"code": -32601, "message": "Method not found"}, "id": 1}

    assert dispatched(response) == Dispatched(
        ErrorObject(-32601, "Method not found", msgspec.UNSET), None
    )


def test_a_dispatched_error_keeps_its_data() -> None:
    response = {
        "jsonrpc": "2.0",
        "error": {"code": -32602, "message": "Invalid params", "data": {"path": "$.cwd"}},
        "id": 1,
    }

    assert dispatched(response) == Dispatched(
        ErrorObject(-32602, "Invalid params", {"path": "$.cwd"}), None
    )


def test_a_dispatched_result_is_passed_through_as_the_same_object() -> None:
    call = object()

    result = dispatched({"jsonrpc": "2.0", "result": call, "id": 1})

    assert result is not None and result.error is None and result.result is call


def test_an_unanswered_notification_dispatches_to_nothing() -> None:
    assert dispatched(None) is None


class _Point(msgspec.Struct):
    x: int = 0
    y: int = 0


async def test_a_typed_route_gets_its_params_decoded_into_its_type_once() -> None:
    got: list[Any] = []

    async def point(params: _Point) -> Any:
        got.append(params)
        return params.x + params.y

    def sync_point(params: _Point) -> Any:
        got.append(params)
        return params.x

    def setup(connection: Connection) -> None:
        connection.route("point", point, _Point)
        connection.route("sync_point", sync_point, _Point)

    async with connected(setup) as peer:
        await peer.send(request(1, "point", {"x": 2, "y": 3, "extra": "ignored"}))
        assert (await peer.frame())["result"] == 5
        await peer.send(request(2, "point"))  # absent params: no fields
        assert (await peer.frame())["result"] == 0
        await peer.send({"jsonrpc": "2.0", "id": 3, "method": "sync_point", "params": None})
        assert (await peer.frame())["result"] == 0
        await peer.send(request(4, "sync_point", {"x": "one"}))
        assert (await peer.frame())["error"] == {
            "code": -32602,
            "message": "Invalid params: Expected `int`, got `str` - at `$.x`",
            "data": {"path": "$.x"},
        }
    assert got == [_Point(2, 3), _Point(), _Point()]
