"""The JSON-RPC 2.0 connection: inbound dispatch, outbound requests, cancellation.

Inbound lines are first probed with msgspec into an `Envelope` (params, result and error kept
as `msgspec.Raw`: scanned, not decoded). The probe tells a response to one of our requests
from a request or notification of the client's, and finds the id that `$/cancel_request` will
name. Requests and notifications are then dispatched by `jsonrpcserver` through its public
API alone (`dispatch_to_serializable`, given a msgspec deserializer and the light validator
below instead of its jsonschema one; see docs/decisions/jsonrpcserver-public-api.md),
synchronously, in arrival order:

- a request's method is resolved and its arguments bound by jsonrpcserver, which answers
  unknown methods (-32601) and malformed requests itself. For a coroutine handler, the method
  it calls returns the handler call as a `Call`, which the connection then runs in a task of
  its own (one task group per connection) inside a cancel scope that `$/cancel_request`
  cancels; a cancelled request is answered -32800. So a long `session/prompt` never holds up
  anything else. A plain-function handler (one that never waits, like `initialize`) is
  called inline and answered at once, without the cost of a task.
- a notification's handler is a plain function, run during dispatch: `session/cancel` takes
  effect the moment its line is read, never queued behind a request.
- handlers receive the params as ONE value, never spread into keyword arguments (so a `_meta`
  key can never overwrite a real parameter), and convert them to msgspec types themselves.

Every frame goes out through one `FrameSink` (the `FrameWriter` in production), in the order it
is sent: a handler's notifications always reach the client before its response.

Outbound requests (`request`) get ids of their own; the response is routed back by id to the
waiting caller. A cancelled caller removes its entry (and tells the client with
`$/cancel_request`), a response nobody waits for is logged and dropped, and once input has
ended every waiter fails with `ConnectionClosed`.
"""

from __future__ import annotations

import inspect
import itertools
import logging
from collections.abc import (
    AsyncIterable,
    Awaitable,
    Callable,
    Coroutine,
    Iterable,
    Iterator,
    Mapping,
)
from typing import Any, Final, NamedTuple, Protocol

import anyio
import msgspec
from anyio.abc import TaskGroup
from msgspec import UNSET

from ..core.rpc_error import ErrorObject, RpcError
from ..transports.stdio import Oversized
from .errors import (
    ClientError,
    ConnectionClosed,
    InternalError,
    InvalidRequest,
    ParseError,
    RequestCancelled,
    TooManyRequests,
    to_rpc_error,
)
from .jsonrpc_core import Error, Result, Success, dispatch_to_serializable

log = logging.getLogger(__name__)

Handler = Callable[[Any], Awaitable[Any]] | Callable[[Any], Any]
"""A request method: gets the params (the decoded JSON value, None when absent), returns the
result. A coroutine function runs in a task of its own; a plain function never waits, so it runs
inline, during dispatch."""

NotificationHandler = Callable[[Any], None]
"""A notification method: runs at once, in arrival order, so it must not block."""

_NO_RAW: Final = msgspec.Raw()
_TOO_DEEP: Final = ParseError("Parse error: JSON nested too deeply")
_NOT_UTF8: Final = ParseError("Parse error: Invalid UTF-8 encoded string")


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class FrameSink(Protocol):
    """Where complete frames go, in order: the transport's writer (a stdio `FrameWriter`, a
    `WebSocketChannel`), or a memory stream in tests."""

    async def send(self, frame: bytes) -> None: ...

    async def send_frames(self, batches: Iterable[bytes]) -> None:
        """Send batches of whole frames (each frame ending in its newline), in order; the
        batches may be made as they are sent, off the event loop."""

    def send_nowait(self, frame: bytes) -> None: ...


# ---------------------------------------------------------------------------------------------
# Wire shapes.


class Envelope(msgspec.Struct, gc=False):
    """The top level of any JSON-RPC message; member values are decoded lazily."""

    jsonrpc: Any = UNSET
    id: Any = UNSET
    method: Any = UNSET
    params: msgspec.Raw = _NO_RAW
    result: msgspec.Raw = _NO_RAW
    error: msgspec.Raw = _NO_RAW


class _Response(msgspec.Struct, gc=False):
    jsonrpc: str
    id: Any
    result: Any


class _ErrorResponse(msgspec.Struct, gc=False):
    jsonrpc: str
    id: Any
    error: ErrorObject


class _Request(msgspec.Struct, omit_defaults=True, gc=False):
    jsonrpc: str
    id: int
    method: str
    params: Any = UNSET


class _Notification(msgspec.Struct, omit_defaults=True, gc=False):
    jsonrpc: str
    method: str
    params: Any = UNSET


class _CancelRequestParams(msgspec.Struct, rename="camel", gc=False):
    """`$/cancel_request` params (ACP's CancelRequestNotification); other keys are ignored."""

    request_id: int | str | None


class _ClientError(msgspec.Struct, gc=False):
    code: int
    message: str
    data: Any = None


_envelope_decoder: Final = msgspec.json.Decoder(Envelope)
_any_decoder: Final = msgspec.json.Decoder()
_client_error_decoder: Final = msgspec.json.Decoder(_ClientError)
_encoder: Final = msgspec.json.Encoder()


def encode_frame(message: Any) -> bytes:
    """One message as a protocol line. msgspec escapes newlines in strings: it is one line."""
    buffer = bytearray()
    _encoder.encode_into(message, buffer)
    buffer += b"\n"
    return bytes(buffer)


_notification_heads: dict[str, bytes] = {}
"""Per method, the bytes of a notification before its params (`session/update` above all)."""


def notification_frame(method: str, params: Any = UNSET) -> bytes:
    """`encode_frame` of a notification, the same bytes, with the fixed head encoded once per
    method: the hot path while a model streams."""
    if params is UNSET:
        return encode_frame(_Notification("2.0", method))
    return _notification_head(method) + _encoder.encode(params) + b"}\n"


def _notification_head(method: str) -> bytes:
    head = _notification_heads.get(method)
    if head is None:
        head = b'{"jsonrpc":"2.0","method":' + _encoder.encode(method) + b',"params":'
        if len(_notification_heads) < 64:
            _notification_heads[method] = head
    return head


FRAMES_BATCH: Final = 256 * 1024
"""Bytes of notifications `notification_frames` encodes into one buffer before handing it on:
enough to make a write worth its cost, few enough that the client reads the first while the
rest are encoded."""


def notification_frames(method: str, params: Iterable[Any]) -> Iterator[bytes]:
    """The frames of one notification per params, as `notification_frame` encodes each, in
    buffers of about `FRAMES_BATCH` bytes (a load's replay is megabytes of them).

    Each params is encoded on its own and a buffer joined once: `encode_into` a growing
    buffer would resize it, and so copy all of it, for every params it holds."""
    head = _notification_head(method)
    encode = _encoder.encode
    parts: list[bytes] = []
    size = 0
    for value in params:
        body = encode(value)
        parts += (head, body, b"}\n")
        size += len(head) + len(body) + 2
        if size >= FRAMES_BATCH:
            yield b"".join(parts)
            parts.clear()
            size = 0
    if parts:
        yield b"".join(parts)


def error_frame(request_id: Any, error: RpcError) -> bytes:
    return encode_frame(_ErrorResponse("2.0", request_id, error.to_wire()))


def result_frame(request_id: Any, result: Any) -> bytes:
    return encode_frame(_Response("2.0", request_id, result))


def _valid_id(value: Any) -> bool:
    # ACP's RequestId: null, an integer or a string. Booleans are ints in Python; not here.
    kind = type(value)
    return kind is str or kind is int or value is None


def _usable_id(envelope: Envelope) -> Any:
    """The id to answer an invalid message with: its own if that is a valid id, else null."""
    return envelope.id if envelope.id is not UNSET and _valid_id(envelope.id) else None


# ---------------------------------------------------------------------------------------------
# What jsonrpcserver is given: a msgspec deserializer, a light validator, boxed params.


class Params:
    """The params of one call, passed to the method as its single positional argument.

    jsonrpcserver spreads a dict of params into keyword arguments; boxing them keeps them one
    value, whatever keys the client sent.
    """

    __slots__ = ("present", "value")

    def __init__(self, value: Any, present: bool) -> None:
        self.value = value
        self.present = present


class Call:
    """A request handler bound to its params, returned by the method jsonrpcserver calls and
    run by the connection in the request's own task."""

    __slots__ = ("handler", "method", "params")

    def __init__(self, method: str, handler: Handler, params: Any) -> None:
        self.method = method
        self.handler = handler
        self.params = params


def deserialize(message: bytes | Envelope) -> dict[str, Any]:
    """jsonrpcserver's deserializer: JSON text (or an already probed envelope) to a request dict.

    Raises `msgspec.DecodeError` for input that is not JSON (jsonrpcserver answers -32700); a
    JSON value that is not an object raises `ValidationError`, also a `DecodeError`.
    """
    envelope = message if isinstance(message, Envelope) else _envelope_decoder.decode(message)
    raw = envelope.params
    params = Params(_any_decoder.decode(raw), True) if raw else Params(None, False)
    request: dict[str, Any] = {
        "jsonrpc": envelope.jsonrpc,
        "method": envelope.method,
        "params": [params],
    }
    if envelope.id is not UNSET:
        request["id"] = envelope.id
    return request


def validate_request(request: dict[str, Any]) -> None:
    """The light validator: the JSON-RPC 2.0 request shape, nothing more.

    `jsonrpc` is "2.0", `method` a string, `id` (when present) a string, an integer or null,
    and `params` (when present) an object, an array or null. Raises `InvalidRequest` naming
    what is wrong.
    """
    if request.get("jsonrpc") != "2.0":
        raise InvalidRequest('Invalid request: "jsonrpc" must be "2.0"')
    if type(request.get("method")) is not str:
        raise InvalidRequest('Invalid request: "method" must be a string')
    if "id" in request and not _valid_id(request["id"]):
        raise InvalidRequest('Invalid request: "id" must be a string, an integer or null')
    params = request["params"][0]
    if params.present and not isinstance(params.value, (dict, list, type(None))):
        raise InvalidRequest('Invalid request: "params" must be an object or an array')


def check_envelope(envelope: Envelope) -> None:
    """The validator's checks on a probed envelope, before the params are decoded.

    jsonrpcserver replaces a validator's message with a generic one, so the connection runs
    these first to tell the client exactly what is wrong.
    """
    if envelope.jsonrpc != "2.0":
        raise InvalidRequest('Invalid request: "jsonrpc" must be "2.0"')
    if type(envelope.method) is not str:
        raise InvalidRequest('Invalid request: "method" must be a string')
    if envelope.id is not UNSET and not _valid_id(envelope.id):
        raise InvalidRequest('Invalid request: "id" must be a string, an integer or null')
    first = memoryview(envelope.params)[:1].tobytes() if envelope.params else b""
    if first and first not in b"{[n":  # object, array, null
        raise InvalidRequest('Invalid request: "params" must be an object or an array')


# jsonrpcserver checks each call against the method's signature; a precomputed one is cheap.
_ONE_ARGUMENT: Final = inspect.Signature(
    [inspect.Parameter("params", inspect.Parameter.POSITIONAL_ONLY)]
)


def _request_method(name: str, handler: Handler) -> Callable[[Params], Result]:
    if inspect.iscoroutinefunction(handler):

        def method(params: Params) -> Result:
            return Success(Call(name, handler, params.value))  # run by the connection, in a task

    else:

        def method(params: Params) -> Result:
            try:
                return Success(handler(params.value))
            except Exception as exc:
                error = to_rpc_error(exc, name)
                if error.data is UNSET:  # jsonrpcserver omits `data` only when none is given
                    return Error(error.code, error.message)
                return Error(error.code, error.message, error.data)

    method.__signature__ = _ONE_ARGUMENT  # type: ignore[attr-defined]  # a function's own attribute
    return method


def _notification_method(name: str, handler: NotificationHandler) -> Callable[[Params], Result]:
    def method(params: Params) -> Result:
        try:
            handler(params.value)
        except Exception as exc:
            # No answer can carry the error, and jsonrpcserver would drop it: say it here.
            log.warning("notification %s failed: %s", name, to_rpc_error(exc, name).message)
        return Success(None)

    method.__signature__ = _ONE_ARGUMENT  # type: ignore[attr-defined]  # a function's own attribute
    return method


class Dispatched(NamedTuple):
    """What jsonrpcserver made of one message: its error, or else its method's result."""

    error: ErrorObject | None
    result: Any


def dispatched(response: dict[str, Any] | None) -> Dispatched | None:
    """One of `dispatch_to_serializable`'s response dicts read back (None: a notification it
    does not answer)."""
    if response is None:
        return None
    error = response.get("error")
    if error is None:
        return Dispatched(None, response["result"])
    return Dispatched(ErrorObject(error["code"], error["message"], error.get("data", UNSET)), None)


# ---------------------------------------------------------------------------------------------
# The connection.


class _Waiter:
    """An outbound request waiting for its response."""

    __slots__ = ("error", "event", "method", "result")

    def __init__(self, method: str) -> None:
        self.method = method
        self.event = anyio.Event()
        self.result: msgspec.Raw | None = None
        self.error: BaseException | None = None


class Then(NamedTuple):
    """A handler's result, and what to do once the response is queued for the client.

    `session.follow` uses it: its notifications must reach the client after its result.
    """

    result: Any
    after: Callable[[], None]


class Connection:
    """One JSON-RPC peer: dispatches what it sends and sends what we ask.

    Register methods with `route` / `route_notification`, then `serve` the inbound messages.
    """

    def __init__(
        self,
        sink: FrameSink,
        *,
        shutdown_grace: float = 5.0,
        max_inflight: int | None = None,
    ) -> None:
        self._sink = sink
        self.shutdown_grace = shutdown_grace
        self.max_inflight = max_inflight
        """Requests that may run at once; one more is answered `TooManyRequests` (no limit:
        None)."""
        self._requests: dict[str, Callable[[Params], Result]] = {}
        self._notifications: dict[str, Callable[[Params], Result]] = {}
        self._inflight: dict[Any, anyio.CancelScope] = {}  # by id, for $/cancel_request
        self._scopes: set[anyio.CancelScope] = set()  # every running request, null ids too
        self._background: set[anyio.CancelScope] = set()  # every task of `start_soon`
        self._idle = anyio.Event()
        self._idle.set()
        self._ids = itertools.count()
        self._pending: dict[int, _Waiter] = {}
        self._closed = False
        self._task_group: TaskGroup | None = None
        self._reader_scope: anyio.CancelScope | None = None
        self._close_callbacks: list[Callable[[], None]] = []
        # Protocol-level (ACP: "x-side: protocol"): the connection itself handles it.
        self.route_notification("$/cancel_request", self._cancel_request_notification)

    # -- routing ----------------------------------------------------------------------------

    def route(self, method: str, handler: Handler) -> None:
        """Serve requests for `method` with `handler`."""
        self._requests[method] = _request_method(method, handler)

    def route_notification(self, method: str, handler: NotificationHandler) -> None:
        """Handle notifications of `method` with `handler`.

        Requests and notifications are separate tables: a request for a notification method
        is answered -32601, and a notification for a request method is ignored, as for any
        unknown method.
        """
        self._notifications[method] = _notification_method(method, handler)

    def on_close(self, callback: Callable[[], None]) -> None:
        """Call `callback` once input has ended (e.g. to cancel running turns)."""
        self._close_callbacks.append(callback)

    @property
    def pending_requests(self) -> int:
        """Outbound requests still waiting for a response."""
        return len(self._pending)

    @property
    def inflight_requests(self) -> int:
        """Inbound requests being handled."""
        return len(self._scopes)

    @property
    def closed(self) -> bool:
        return self._closed

    # -- sending ------------------------------------------------------------------------------

    async def notify(self, method: str, params: Any = UNSET) -> None:
        """Send a notification; it reaches the client after every frame sent before it."""
        await self._sink.send(notification_frame(method, params))

    async def notify_all(self, method: str, params: Iterable[Any]) -> None:
        """Send one notification per params, in order, in as few writes as the transport
        allows. `params` may be consumed after this returns, in another thread (the stdio
        writer's): it must not change meanwhile."""
        await self._sink.send_frames(notification_frames(method, params))

    async def request(self, method: str, params: Any = UNSET, result_type: Any = Any) -> Any:
        """Send a request to the client and wait for its response.

        Returns the result converted to `result_type`; raises `ClientError` when the client
        answers with an error and `ConnectionClosed` when it can no longer answer. Cancelling
        the caller forgets the request (a late response is dropped) and sends the client
        `$/cancel_request` for it.
        """
        if self._closed:
            raise ConnectionClosed(f"{method}: the client has closed the connection")
        request_id = next(self._ids)
        waiter = _Waiter(method)
        self._pending[request_id] = waiter
        sent = False
        try:
            try:
                await self._sink.send(encode_frame(_Request("2.0", request_id, method, params)))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                raise ConnectionClosed(f"{method}: the connection is closed") from None
            sent = True
            await waiter.event.wait()
        except BaseException:
            # Whatever ends the wait (cancellation above all), the entry goes: nothing leaks.
            if self._pending.pop(request_id, None) is not None and sent and not self._closed:
                self._cancel_outbound(request_id)
            raise
        if waiter.error is not None:
            raise waiter.error
        assert waiter.result is not None
        try:
            return msgspec.json.decode(waiter.result, type=result_type)
        except msgspec.DecodeError as exc:  # the client's answer, not our params, is wrong
            raise ClientError(method, InternalError.CODE, f"malformed result: {exc}") from None

    def _cancel_outbound(self, request_id: int) -> None:
        # Best effort and without waiting: the caller is being cancelled, so it cannot block on
        # a full output buffer, and a lost courtesy notification costs nothing.
        try:
            self._sink.send_nowait(
                encode_frame(_Notification("2.0", "$/cancel_request", {"requestId": request_id}))
            )
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            log.debug("could not send $/cancel_request for %s", request_id)

    # -- receiving ----------------------------------------------------------------------------

    async def serve(self, messages: AsyncIterable[bytes | Oversized]) -> None:
        """Handle every inbound message until their end (or `stop()`), then shut down.

        `messages` is the transport's framing (stdio lines, WebSocket text frames): one
        JSON-RPC message each, or `Oversized` for one the transport skipped; reading also ends
        when an answer cannot be sent. Then every waiter for a response fails with
        `ConnectionClosed`, in-flight requests get `shutdown_grace` seconds to finish, the rest
        (and the background tasks) are cancelled (the requests answered -32800), and this
        returns when no handler is left.
        """
        async with anyio.create_task_group() as task_group:
            self._task_group = task_group
            with anyio.CancelScope() as self._reader_scope:
                async for message in messages:
                    frame = self._receive_safely(message)
                    if frame is not None:
                        try:
                            await self._sink.send(frame)
                        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                            break  # nobody hears us any more: as at the end of input
            self.close()
            with anyio.move_on_after(self.shutdown_grace):
                await self._idle.wait()
            for scope in [*self._scopes, *self._background]:
                scope.cancel()
        self._task_group = None

    def start_soon(self, task: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        """Run `task` in the background for as long as the connection serves: once input has
        ended it gets the requests' `shutdown_grace`, then is cancelled. A send that fails
        because the client went ends it quietly."""
        if self._task_group is None:
            raise ConnectionClosed("the connection is not serving")
        self._task_group.start_soon(self._run_background, task, *args)

    async def _run_background(
        self, task: Callable[..., Coroutine[Any, Any, Any]], *args: Any
    ) -> None:
        with anyio.CancelScope() as scope:
            self._background.add(scope)
            try:
                await task(*args)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                log.debug("output closed under %s", getattr(task, "__qualname__", task))
            finally:
                self._background.discard(scope)

    def stop(self) -> None:
        """Stop reading input (e.g. on SIGTERM) and shut down as at end of input."""
        if self._reader_scope is not None:
            self._reader_scope.cancel()

    def close(self) -> None:
        """Input has ended: cancel what the close callbacks cancel, fail every waiter."""
        if self._closed:
            return
        self._closed = True
        for callback in self._close_callbacks:
            try:
                callback()
            except Exception:
                log.exception("close callback failed")
        pending, self._pending = self._pending, {}
        for waiter in pending.values():
            waiter.error = ConnectionClosed(
                f"{waiter.method}: the client closed the connection before answering"
            )
            waiter.event.set()
        if pending:
            log.info("end of input: %d outbound request(s) left unanswered", len(pending))

    def _receive_safely(self, line: bytes | Oversized) -> bytes | None:
        try:
            return self._receive(line)
        except Exception:
            # A bug here must cost one message, never the connection.
            log.exception("internal error while reading a message")
            return error_frame(None, InternalError("Internal error while reading a message"))

    def _receive(self, line: bytes | Oversized) -> bytes | None:
        """Everything about a line that needs no waiting; an immediate answer, if any."""
        if isinstance(line, Oversized):
            problem = (
                f"Invalid request: line longer than the {line.limit}-byte limit; it was skipped"
            )
            return error_frame(None, InvalidRequest(problem, {"maxLineBytes": line.limit}))
        if not line.strip():
            return None  # blank lines between messages carry nothing
        try:
            envelope = _envelope_decoder.decode(line)
        except msgspec.ValidationError:
            return self._non_object(line)
        except msgspec.DecodeError as exc:
            return error_frame(None, ParseError(f"Parse error: {exc}"))
        except RecursionError:
            return error_frame(None, _TOO_DEEP)
        if not line.isascii() and not _is_utf8(line):
            # msgspec checks the strings it decodes, not those it skips (unknown keys and their
            # values): a line that is not UTF-8 is not JSON text, wherever the bad bytes are.
            return error_frame(None, _NOT_UTF8)
        if envelope.method is UNSET and (envelope.result or envelope.error):
            self._receive_response(envelope)
            return None
        try:
            check_envelope(envelope)
        except InvalidRequest as exc:
            return error_frame(_usable_id(envelope), exc)
        request_id = envelope.id
        notification = request_id is UNSET
        if not notification and request_id is not None and request_id in self._inflight:
            return error_frame(
                request_id,
                InvalidRequest("Invalid request: a request with this id is still in flight"),
            )
        response = self._dispatch(envelope, self._notifications if notification else self._requests)
        if response is not None and response.error is not None:
            # An unknown method, bad params, an inline handler's error.
            error = response.error
            if error.code == ParseError.CODE:
                # The params are not valid JSON text (say, invalid UTF-8 in a string): the
                # message as a whole is unparsable, so it is answered like any parse error.
                return error_frame(None, ParseError(f"Parse error: {error.data}"))
            if notification:
                return None
            return encode_frame(_ErrorResponse("2.0", request_id, error))
        if notification or response is None:
            return None
        call = response.result
        if not isinstance(call, Call):  # an inline handler's result
            return result_frame(request_id, call)
        task_group = self._task_group
        if task_group is None:
            raise RuntimeError("a request arrived outside serve()")
        if self.max_inflight is not None and len(self._scopes) >= self.max_inflight:
            return error_frame(
                request_id,
                TooManyRequests(
                    f"Too many requests in flight: this connection may have "
                    f"{self.max_inflight} at once; wait for an answer before sending more",
                    {"maxPendingRequests": self.max_inflight},
                ),
            )
        scope = anyio.CancelScope()
        if request_id is not None:
            self._inflight[request_id] = scope
        if not self._scopes:
            self._idle = anyio.Event()
        self._scopes.add(scope)
        task_group.start_soon(self._run, request_id, call, scope)
        return None

    def _dispatch(
        self, envelope: Envelope, table: Mapping[str, Callable[[Params], Result]]
    ) -> Dispatched | None:
        response = dispatch_to_serializable(
            envelope,  # the deserializer takes probed envelopes too
            table,
            deserializer=deserialize,
            validator=validate_request,
        )
        assert not isinstance(response, list)  # a batch is refused before dispatch
        return dispatched(response)

    def _non_object(self, line: bytes) -> bytes:
        try:
            value = _any_decoder.decode(line)
        except msgspec.DecodeError as exc:
            return error_frame(None, ParseError(f"Parse error: {exc}"))
        except RecursionError:
            return error_frame(None, _TOO_DEEP)
        if isinstance(value, list):
            # JSON-RPC batches are valid JSON-RPC, but ACP never uses them: one clear refusal.
            problem = (
                "batch requests are not supported" if value else "an empty array is not a request"
            )
            return error_frame(None, InvalidRequest(f"Invalid request: {problem}"))
        return error_frame(None, InvalidRequest("Invalid request: a request must be a JSON object"))

    async def _run(self, request_id: Any, call: Call, scope: anyio.CancelScope) -> None:
        frame: bytes | None = None
        after: Callable[[], None] | None = None
        try:
            with scope:
                try:
                    result = await call.handler(call.params)
                except Exception as exc:
                    frame = error_frame(request_id, to_rpc_error(exc, call.method))
                else:
                    if isinstance(result, Then):
                        result, after = result
                    frame = result_frame(request_id, result)
            if frame is None:  # cancelled by $/cancel_request or at shutdown
                frame = error_frame(request_id, RequestCancelled("Request cancelled"))
                after = None
            await self._sink.send(frame)
            if after is not None:
                after()
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            log.debug("output closed before the answer to %r", request_id)
        except msgspec.EncodeError:  # a handler returned something unencodable: a bug
            log.exception("cannot encode the result of %s", call.method)
            await self._sink.send(
                error_frame(
                    request_id, InternalError(f"Internal error while handling {call.method}")
                )
            )
        finally:
            if self._inflight.get(request_id) is scope:
                del self._inflight[request_id]
            self._scopes.discard(scope)
            if not self._scopes:
                self._idle.set()

    def _cancel_request_notification(self, params: Any) -> None:
        request = msgspec.convert({} if params is None else params, _CancelRequestParams)
        if not self.cancel_request(request.request_id):
            log.debug("$/cancel_request for %r: no such request in flight", request.request_id)

    def cancel_request(self, request_id: Any) -> bool:
        """`$/cancel_request`: cancel an in-flight request; False if there is none by that id."""
        scope = self._inflight.get(request_id) if _valid_id(request_id) else None
        if scope is None:
            return False
        scope.cancel()
        return True

    def _receive_response(self, envelope: Envelope) -> None:
        request_id = envelope.id
        waiter = self._pending.pop(request_id, None) if type(request_id) is int else None
        if waiter is None:
            log.warning(
                "dropped a response to request id %r: no request of ours is waiting for it",
                request_id,
            )
            return
        if envelope.error:
            try:
                error = _client_error_decoder.decode(envelope.error)
                waiter.error = ClientError(waiter.method, error.code, error.message, error.data)
            except msgspec.DecodeError:
                waiter.error = ClientError(waiter.method, -32603, "malformed error object", None)
        else:
            waiter.result = envelope.result
        waiter.event.set()
