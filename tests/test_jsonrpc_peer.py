"""The sans-I/O JSON-RPC peer: messages in, events out, frames out; no process, no event loop.

The wire answers asserted here are the ones tests/test_hostile_input.py asserts of the running
server (byte for byte where the server's frames come from the peer alone).
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from acp_server.jsonrpc.errors import ErrorObject, InvalidParams, ParseError, RpcError
from acp_server.jsonrpc.peer import (
    MAX_MESSAGE_BYTES,
    CancelRequested,
    ErrorResponse,
    Invalid,
    Notification,
    Oversized,
    Peer,
    Request,
    Response,
)
from acp_server.transports.stdio import DEFAULT_MAX_LINE_BYTES, LineFramer


def answer_of(event: object) -> Any:
    assert isinstance(event, Invalid), event
    assert b"\n" not in event.answer  # one message: the transport frames it
    return json.loads(event.answer)


def parse_error(message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": message}}


def invalid_request(request_id: Any, problem: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": -32600, "message": f"Invalid request: {problem}"}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


# ---------------------------------------------------------------------------------------------
# The other end's requests and notifications.


def test_a_request_is_an_event_with_its_id_method_and_raw_params() -> None:
    peer = Peer()
    event = peer.receive(b'{"jsonrpc":"2.0","id":7,"method":"session/new","params":{"cwd":"/"}}')
    assert isinstance(event, Request)
    assert (event.id, event.method) == (7, "session/new")
    assert isinstance(event.params, msgspec.Raw)
    assert msgspec.json.decode(event.params) == {"cwd": "/"}
    assert peer.in_flight(7)


def test_a_request_without_params_has_empty_raw_params() -> None:
    event = Peer().receive(b'{"jsonrpc":"2.0","id":"a","method":"session/list"}')
    assert isinstance(event, Request) and not event.params


def test_answer_and_fail_are_the_exact_frames_and_end_the_request() -> None:
    peer = Peer()
    peer.receive(b'{"jsonrpc":"2.0","id":1,"method":"m"}')
    peer.receive(b'{"jsonrpc":"2.0","id":"two","method":"m"}')
    assert peer.answer(1, {"ok": True}) == b'{"jsonrpc":"2.0","id":1,"result":{"ok":true}}'
    assert (
        peer.fail("two", InvalidParams.at("$.cwd", "must be absolute"))
        == b'{"jsonrpc":"2.0","id":"two","error":{"code":-32602,'
        b'"message":"Invalid params: must be absolute - at `$.cwd`","data":{"path":"$.cwd"}}}'
    )
    assert not peer.in_flight(1) and not peer.in_flight("two")


def test_an_error_without_data_leaves_data_out() -> None:
    frame = Peer().fail(3, RpcError("Nope", code=-32000))
    assert frame == b'{"jsonrpc":"2.0","id":3,"error":{"code":-32000,"message":"Nope"}}'


def test_a_second_request_with_an_id_in_flight_is_refused_until_the_first_is_answered() -> None:
    peer = Peer()
    line = b'{"jsonrpc":"2.0","id":5,"method":"session/prompt"}'
    assert isinstance(peer.receive(line), Request)
    assert answer_of(peer.receive(line)) == invalid_request(
        5, "a request with this id is still in flight"
    )
    peer.answer(5, None)
    assert isinstance(peer.receive(line), Request)


def test_ids_of_different_types_are_different_requests() -> None:
    peer = Peer()
    assert isinstance(peer.receive(b'{"jsonrpc":"2.0","id":1,"method":"m"}'), Request)
    assert isinstance(peer.receive(b'{"jsonrpc":"2.0","id":"1","method":"m"}'), Request)


def test_requests_with_a_null_id_are_never_in_flight_by_id() -> None:
    peer = Peer()
    line = b'{"jsonrpc":"2.0","id":null,"method":"m"}'
    first, second = peer.receive(line), peer.receive(line)
    assert isinstance(first, Request) and isinstance(second, Request)
    assert first.id is None and not peer.in_flight(None)


def test_a_notification_has_no_id_and_is_not_in_flight() -> None:
    event = Peer().receive(b'{"jsonrpc":"2.0","method":"session/cancel","params":{"s":1}}')
    assert isinstance(event, Notification)
    assert event.method == "session/cancel"
    assert msgspec.json.decode(event.params) == {"s": 1}


@pytest.mark.parametrize("blank", [b"", b" ", b"\t", b"\r", b"  \r"])
def test_a_blank_message_is_nothing(blank: bytes) -> None:
    assert Peer().receive(blank) is None


# ---------------------------------------------------------------------------------------------
# $/cancel_request.


def test_cancel_request_for_a_request_in_flight_is_an_event() -> None:
    peer = Peer()
    peer.receive(b'{"jsonrpc":"2.0","id":"p","method":"session/prompt"}')
    event = peer.receive(
        b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"p","x":1}}'
    )
    assert event == CancelRequested("p")


@pytest.mark.parametrize(
    "params",
    [b'{"requestId":"nobody"}', b'{"requestId":null}', b'{"requestId":[1]}', b"{}", b"[]"],
)
def test_cancel_request_for_no_request_in_flight_is_dropped(params: bytes) -> None:
    peer = Peer()
    peer.receive(b'{"jsonrpc":"2.0","id":"p","method":"session/prompt"}')
    line = b'{"jsonrpc":"2.0","method":"$/cancel_request","params":' + params + b"}"
    assert peer.receive(line) is None
    assert peer.in_flight("p")


def test_cancel_request_for_an_answered_request_is_dropped() -> None:
    peer = Peer()
    peer.receive(b'{"jsonrpc":"2.0","id":1,"method":"m"}')
    peer.answer(1, None)
    assert (
        peer.receive(b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}')
        is None
    )


def test_cancel_request_sent_as_a_request_is_a_request() -> None:
    # As for any method: the dispatcher answers it (-32601 on the server).
    event = Peer().receive(b'{"jsonrpc":"2.0","id":9,"method":"$/cancel_request","params":{}}')
    assert isinstance(event, Request) and event.method == "$/cancel_request"


# ---------------------------------------------------------------------------------------------
# What is no message: -32700 and -32600, answered with the exact frames.


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (b"{", "Input data was truncated"),
        (b'{"jsonrpc":"2.0" "id":1}', "JSON is malformed: expected ',' or '}' (byte 17)"),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"session/list"} x',
            "JSON is malformed: trailing characters (byte 50)",
        ),
        (b"NaN", "JSON is malformed: invalid character (byte 0)"),
        (
            b'{"jsonrpc":"2.0","id":"\\ud800","method":"session/list"}',
            "JSON is malformed: unexpected end of escaped utf-16 surrogate pair (byte 29)",
        ),
    ],
)
def test_what_is_not_json_is_a_parse_error_with_a_null_id(line: bytes, problem: str) -> None:
    assert answer_of(Peer().receive(line)) == parse_error(f"Parse error: {problem}")


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"session/\xff"}',
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"cwd":"/caf\xe9"}}',
        b'{"jsonrpc":"2.0","id":1,"method":"m","extra":"an unknown member \xff"}',
        b'{"jsonrpc":"2.0","id":424242,"result":"\xff"}',
    ],
)
def test_invalid_utf8_anywhere_is_a_parse_error(line: bytes) -> None:
    answer = answer_of(Peer().receive(line))
    assert answer == parse_error("Parse error: Invalid UTF-8 encoded string")


def test_json_nested_too_deeply_is_a_parse_error() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    assert answer_of(Peer().receive(deep)) == parse_error("Parse error: JSON nested too deeply")


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (b"42", "a request must be a JSON object"),
        (b"null", "a request must be a JSON object"),
        (b'"m"', "a request must be a JSON object"),
        (b"[]", "an empty array is not a request"),
        (b"[1,2,3]", "batch requests are not supported"),
        (b'[{"jsonrpc":"2.0","id":1,"method":"m"}]', "batch requests are not supported"),
    ],
)
def test_json_that_is_no_request_object_is_an_invalid_request(line: bytes, problem: str) -> None:
    assert answer_of(Peer().receive(line)) == invalid_request(None, problem)


def test_a_batch_enters_no_request() -> None:
    peer = Peer()
    peer.receive(b'[{"jsonrpc":"2.0","id":1,"method":"m"},{"jsonrpc":"2.0","id":2,"method":"m"}]')
    assert not peer.in_flight(1) and not peer.in_flight(2)


@pytest.mark.parametrize(
    ("line", "request_id", "problem"),
    [
        (b'{"id":1,"method":"m"}', 1, '"jsonrpc" must be "2.0"'),
        (b'{"jsonrpc":"1.0","id":"a","method":"m"}', "a", '"jsonrpc" must be "2.0"'),
        (b'{"jsonrpc":"2.0","id":1}', 1, '"method" must be a string'),
        (b'{"jsonrpc":"2.0","id":1,"method":7}', 1, '"method" must be a string'),
        (
            b'{"jsonrpc":"2.0","id":true,"method":"m"}',
            None,
            '"id" must be a string, an integer or null',
        ),
        (
            b'{"jsonrpc":"2.0","id":1.5,"method":"m"}',
            None,
            '"id" must be a string, an integer or null',
        ),
        (
            b'{"jsonrpc":"2.0","id":{},"method":"m"}',
            None,
            '"id" must be a string, an integer or null',
        ),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"m","params":3}',
            1,
            '"params" must be an object or an array',
        ),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"m","params":"x"}',
            1,
            '"params" must be an object or an array',
        ),
    ],
)
def test_an_object_that_is_no_request_is_answered_with_its_own_id_when_valid(
    line: bytes, request_id: Any, problem: str
) -> None:
    peer = Peer()
    assert answer_of(peer.receive(line)) == invalid_request(request_id, problem)
    assert not peer.in_flight(request_id)


@pytest.mark.parametrize("params", [b"{}", b"[]", b"null", b'[1,"a"]'])
def test_params_may_be_an_object_an_array_or_null(params: bytes) -> None:
    line = b'{"jsonrpc":"2.0","id":1,"method":"m","params":' + params + b"}"
    assert isinstance(Peer().receive(line), Request)


# ---------------------------------------------------------------------------------------------
# The size limit: one place.


def test_an_oversized_message_is_answered_with_the_limit() -> None:
    answer = answer_of(Peer().receive(Oversized(1024)))
    assert answer == invalid_request(
        None,
        "line longer than the 1024-byte limit; it was skipped",
        {"maxLineBytes": 1024},
    )


def test_the_stdio_line_limit_is_the_peers_message_limit() -> None:
    assert DEFAULT_MAX_LINE_BYTES == MAX_MESSAGE_BYTES


def test_messages_fed_in_pieces_through_the_line_framer_are_the_same_events() -> None:
    stream = (
        b'{"jsonrpc":"2.0","id":1,"method":"a","params":{"t":"\xc3\xbcber"}}\n'
        b"\n"
        b'{"jsonrpc":"2.0","method":"n"}\n'
        + b'{"jsonrpc":"2.0","id":2,"method":"big","params":["'
        + b"x" * 80
        + b'"]}\n'
        b"{oops\n"
        b'{"jsonrpc":"2.0","id":3,"method":"c"}\n'
    )

    def events(pieces: list[bytes]) -> list[Any]:
        framer, peer = LineFramer(max_line=64), Peer()
        out = []
        for piece in pieces:
            for message in framer.feed(piece):
                event = peer.receive(message)
                out.append(event.answer if isinstance(event, Invalid) else event)
        return out

    whole = events([stream])
    assert [type(e).__name__ for e in whole] == [
        "Request",
        "NoneType",
        "Notification",
        "bytes",  # oversized
        "bytes",  # not JSON
        "Request",
    ]
    for size in (1, 2, 3, 7, 64):
        pieces = [stream[i : i + size] for i in range(0, len(stream), size)]
        assert events(pieces) == whole


# ---------------------------------------------------------------------------------------------
# Our requests: ids, answers, cancel, close.


def test_our_requests_get_ids_from_the_first_one_up_and_exact_frames() -> None:
    peer = Peer(first_id=1)
    assert peer.request("fs/read_text_file", {"path": "/a"}) == (
        1,
        b'{"jsonrpc":"2.0","id":1,"method":"fs/read_text_file","params":{"path":"/a"}}',
    )
    assert peer.request("x") == (2, b'{"jsonrpc":"2.0","id":2,"method":"x"}')
    assert peer.pending == 2


def test_a_response_finds_its_request_by_id() -> None:
    peer = Peer()
    first, _ = peer.request("a")
    second, _ = peer.request("b")
    event = peer.receive(b'{"jsonrpc":"2.0","id":%d,"result":{"v":1}}' % second)
    assert isinstance(event, Response)
    assert (event.id, event.method, msgspec.json.decode(event.result)) == (second, "b", {"v": 1})
    assert peer.pending == 1
    assert peer.receive(b'{"jsonrpc":"2.0","id":%d,"result":null}' % first) == Response(
        first, "a", msgspec.Raw(b"null")
    )


def test_an_error_response_carries_the_error_object() -> None:
    peer = Peer()
    request_id, _ = peer.request("fs/read_text_file")
    event = peer.receive(
        b'{"jsonrpc":"2.0","id":0,"error":{"code":-32002,"message":"Not found","data":{"p":1}}}'
    )
    assert event == ErrorResponse(
        request_id, "fs/read_text_file", ErrorObject(-32002, "Not found", {"p": 1})
    )


def test_a_malformed_error_object_is_an_internal_error() -> None:
    peer = Peer()
    peer.request("m")
    event = peer.receive(b'{"jsonrpc":"2.0","id":0,"error":{"code":"x"}}')
    assert event == ErrorResponse(0, "m", ErrorObject(-32603, "malformed error object"))


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":99,"result":1}',
        b'{"jsonrpc":"2.0","id":"0","result":1}',
        b'{"jsonrpc":"2.0","id":true,"result":1}',
        b'{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"m"}}',
    ],
)
def test_a_response_nobody_waits_for_is_dropped(line: bytes) -> None:
    peer = Peer()
    peer.request("m")  # id 0
    assert peer.receive(line) is None
    assert peer.pending == 1


def test_cancel_forgets_our_request_and_gives_the_cancel_frame_once() -> None:
    peer = Peer()
    request_id, _ = peer.request("session/request_permission")
    assert peer.cancel(request_id) == (
        b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":0}}'
    )
    assert peer.cancel(request_id) is None
    assert peer.receive(b'{"jsonrpc":"2.0","id":0,"result":{}}') is None  # a late answer


def test_close_forgets_every_request_of_ours() -> None:
    peer = Peer()
    peer.request("a")
    peer.request("b")
    assert peer.close() == [(0, "a"), (1, "b")]
    assert peer.pending == 0


def test_notify_is_the_exact_frame() -> None:
    peer = Peer()
    assert peer.notify("n") == b'{"jsonrpc":"2.0","method":"n"}'
    assert peer.notify("n", {"a": [1]}) == b'{"jsonrpc":"2.0","method":"n","params":{"a":[1]}}'


def test_two_peers_talk_to_each_other() -> None:
    client, server = Peer(first_id=1), Peer()
    request_id, frame = client.request("initialize", {"protocolVersion": 1})
    request = server.receive(frame.rstrip(b"\n"))
    assert isinstance(request, Request) and request.id == request_id
    response = client.receive(server.answer(request.id, {"protocolVersion": 1}))
    assert isinstance(response, Response) and response.method == "initialize"
    request_id, frame = client.request("session/prompt")
    server.receive(frame)
    cancel = client.cancel(request_id)
    assert cancel is not None
    assert server.receive(cancel) == CancelRequested(request_id)


def test_reject_answers_a_request_as_an_unparsable_message() -> None:
    peer = Peer()
    peer.receive(b'{"jsonrpc":"2.0","id":4,"method":"m","params":{}}')
    frame = peer.reject(4, ParseError("Parse error: bad"))
    assert json.loads(frame) == parse_error("Parse error: bad")
    assert not peer.in_flight(4)
