"""The server's JSON-RPC connection: the jsonrpc runner with jsonrpcserver as its dispatcher.

The peer (`acp_server.jsonrpc`) has already probed and validated each message (the one
validation) and kept the ids; what is left here is dispatch. Requests and notifications are
dispatched by `jsonrpcserver` through its public API alone (`dispatch_to_serializable`, given a
msgspec deserializer and no validator of its own; see docs/decisions/jsonrpcserver-public-api.md),
synchronously, in arrival order:

- a request's method is resolved and its arguments bound by jsonrpcserver, which answers
  unknown methods (-32601) itself. For a coroutine handler, the method it calls returns the
  handler call as a `Call`, which the runner then runs in a task of its own (one task group per
  connection) inside a cancel scope that `$/cancel_request` cancels; a cancelled request is
  answered -32800. So a long `session/prompt` never holds up anything else. A plain-function
  handler (one that never waits, like `initialize`) is called inline and answered at once,
  without the cost of a task.
- a notification's handler is a plain function, run during dispatch: `session/cancel` takes
  effect the moment its line is read, never queued behind a request.
- handlers receive the params as ONE value, never spread into keyword arguments (so a `_meta`
  key can never overwrite a real parameter). The params are decoded once, from the JSON text
  the peer left them as, straight into the type the method was routed with (absent or null
  params are an empty object), or into plain JSON values for a method routed without one; a
  request handler's params are decoded where it runs (in its task, for a coroutine), and a
  ValidationError is the -32602 that names the field.
"""

from __future__ import annotations

import inspect
import logging
import warnings
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Final, NamedTuple

import msgspec
from msgspec import UNSET

from ..jsonrpc.errors import ErrorObject, RpcError
from ..jsonrpc.peer import Notification, Peer, Request
from ..jsonrpc.runner import FrameSink, Runner, Then
from ..jsonrpc.wire import (
    Envelope,
    any_decoder,
    encode_frame,
    envelope_decoder,
    error_frame,
    notification_frame,
    notification_frames,
    result_frame,
)
from .errors import (
    ClientError,
    ConnectionClosed,
    InternalError,
    ParseError,
    TooManyRequests,
    to_rpc_error,
)

with warnings.catch_warnings():
    # jsonrpcserver 5.0's `main` reads its JSON schema with `importlib.resources.read_text`,
    # deprecated since Python 3.11: a warning about its code, not ours, on every start.
    warnings.simplefilter("ignore", DeprecationWarning)
    import jsonrpcserver
    from jsonrpcserver import Error, Result, Success

PROTOCOL_VERSIONS: Final = (1, 2)
"""The ACP versions a connection may speak, the first until `initialize` says otherwise."""

__all__ = [
    "PROTOCOL_VERSIONS",
    "Call",
    "Connection",
    "Dispatched",
    "FrameSink",
    "Then",
    "dispatched",
    "encode_frame",
    "error_frame",
    "notification_frame",
    "notification_frames",
    "result_frame",
]

log = logging.getLogger(__name__)

Handler = Callable[[Any], Awaitable[Any]] | Callable[[Any], Any]
"""A request method: gets the params (of the type it was routed with, else the decoded JSON
value, None when absent), returns the result. A coroutine function runs in a task of its own; a
plain function never waits, so it runs inline, during dispatch."""

NotificationHandler = Callable[[Any], None]
"""A notification method: runs at once, in arrival order, so it must not block."""


# ---------------------------------------------------------------------------------------------
# What jsonrpcserver is given: a msgspec deserializer, boxed params.


class Params:
    """The params of one call, as JSON text, passed to the method as its single positional
    argument.

    jsonrpcserver spreads a dict of params into keyword arguments; boxing them keeps them one
    value, whatever keys the client sent.
    """

    __slots__ = ("raw",)

    def __init__(self, raw: msgspec.Raw) -> None:
        self.raw = raw


_EMPTY: Final = msgspec.Raw(b"{}")
_NULL: Final = msgspec.Raw(b"null")


class _Decode:
    """Params as JSON text to the value a handler takes."""

    __slots__ = ("_decoder",)

    def __init__(self, params_type: type | None) -> None:
        self._decoder: msgspec.json.Decoder[Any] | None = (
            None if params_type is None else msgspec.json.Decoder(params_type)
        )

    def __call__(self, raw: msgspec.Raw) -> Any:
        if self._decoder is None:
            return any_decoder.decode(raw) if raw else None
        # Absent or null params are no fields: a type of only optional fields takes them.
        return self._decoder.decode(raw if raw and raw != _NULL else _EMPTY)


class Call:
    """A request handler bound to its params, returned by the method jsonrpcserver calls and
    run by the connection in the request's own task, which decodes the params."""

    __slots__ = ("decode", "handler", "method", "raw")

    def __init__(self, method: str, handler: Handler, decode: _Decode, raw: msgspec.Raw) -> None:
        self.method = method
        self.handler = handler
        self.decode = decode
        self.raw = raw

    async def __call__(self) -> Any:
        return await self.handler(self.decode(self.raw))


def deserialize(message: bytes | Envelope) -> dict[str, Any]:
    """jsonrpcserver's deserializer: JSON text (or an already probed envelope) to a request
    dict whose params are left as JSON text, for the method to decode into its type.

    Raises `msgspec.DecodeError` for input that is not JSON (jsonrpcserver answers -32700); a
    JSON value that is not an object raises `ValidationError`, also a `DecodeError`.
    """
    envelope = message if isinstance(message, Envelope) else envelope_decoder.decode(message)
    params = Params(envelope.params)
    request: dict[str, Any] = {
        "jsonrpc": envelope.jsonrpc,
        "method": envelope.method,
        "params": [params],
    }
    if envelope.id is not UNSET:
        request["id"] = envelope.id
    return request


def _validated(request: dict[str, Any]) -> None:
    """jsonrpcserver's validator: nothing to do, the peer has validated the message already."""


# jsonrpcserver checks each call against the method's signature; a precomputed one is cheap.
_ONE_ARGUMENT: Final = inspect.Signature(
    [inspect.Parameter("params", inspect.Parameter.POSITIONAL_ONLY)]
)


def _request_method(
    name: str, handler: Handler, params_type: type | None
) -> Callable[[Params], Result]:
    decode = _Decode(params_type)
    if inspect.iscoroutinefunction(handler):

        def method(params: Params) -> Result:
            return Success(Call(name, handler, decode, params.raw))  # run in a task

    else:

        def method(params: Params) -> Result:
            try:
                return Success(handler(decode(params.raw)))
            except Exception as exc:
                error = to_rpc_error(exc, name)
                if error.data is UNSET:  # jsonrpcserver omits `data` only when none is given
                    return Error(error.code, error.message)
                return Error(error.code, error.message, error.data)

    method.__signature__ = _ONE_ARGUMENT  # type: ignore[attr-defined]  # a function's own attribute
    return method


def _notification_method(
    name: str, handler: NotificationHandler, params_type: type | None
) -> Callable[[Params], Result]:
    decode = _Decode(params_type)

    def method(params: Params) -> Result:
        try:
            handler(decode(params.raw))
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


def _dispatch(
    envelope: Envelope, table: Mapping[str, Callable[[Params], Result]]
) -> Dispatched | None:
    response = jsonrpcserver.dispatch_to_serializable(
        envelope,  # the deserializer takes probed envelopes
        table,
        deserializer=deserialize,
        validator=_validated,
    )
    assert not isinstance(response, list)  # a batch is refused by the peer
    return dispatched(response)


# ---------------------------------------------------------------------------------------------
# The connection.


class Connection(Runner):
    """The server's end of one JSON-RPC connection: dispatches what the client sends and sends
    what we ask.

    Register methods with `route` / `route_notification`, then `serve` the inbound messages.
    """

    def __init__(
        self,
        sink: FrameSink,
        *,
        shutdown_grace: float = 5.0,
        max_inflight: int | None = None,
    ) -> None:
        super().__init__(sink, Peer(), shutdown_grace=shutdown_grace)
        self.max_inflight = max_inflight
        """Requests that may run at once; one more is answered `TooManyRequests` (no limit:
        None)."""
        self._request_tables: dict[int, dict[str, Callable[[Params], Result]]] = {
            version: {} for version in PROTOCOL_VERSIONS
        }
        self._notification_tables: dict[int, dict[str, Callable[[Params], Result]]] = {
            version: {} for version in PROTOCOL_VERSIONS
        }
        self.protocol_version = PROTOCOL_VERSIONS[0]
        """The ACP version this connection speaks: 1 until `initialize` agrees on another
        (`speak`). One connection speaks one version; each has its own method tables."""
        self._requests = self._request_tables[self.protocol_version]
        self._notifications = self._notification_tables[self.protocol_version]

    # -- routing ----------------------------------------------------------------------------

    def route(
        self,
        method: str,
        handler: Handler,
        params_type: type | None = None,
        *,
        version: int | None = None,
    ) -> None:
        """Serve requests for `method` with `handler`, which takes the params decoded into
        `params_type` (plain JSON values without one): in the ACP `version` given, else in
        every version."""
        routed = _request_method(method, handler, params_type)
        for table in self._tables(self._request_tables, version):
            table[method] = routed

    def route_notification(
        self,
        method: str,
        handler: NotificationHandler,
        params_type: type | None = None,
        *,
        version: int | None = None,
    ) -> None:
        """Handle notifications of `method` with `handler`, its params and `version` as for
        `route`.

        Requests and notifications are separate tables: a request for a notification method
        is answered -32601, and a notification for a request method is ignored, as for any
        unknown method.
        """
        routed = _notification_method(method, handler, params_type)
        for table in self._tables(self._notification_tables, version):
            table[method] = routed

    @staticmethod
    def _tables(
        tables: dict[int, dict[str, Callable[[Params], Result]]], version: int | None
    ) -> list[dict[str, Callable[[Params], Result]]]:
        if version is None:
            return list(tables.values())
        return [tables[version]]

    def speak(self, version: int) -> None:
        """From now on, serve the methods of ACP `version` (which `initialize` agreed on)."""
        self.protocol_version = version
        self.peer.batches = version >= 2  # JSON-RPC batches: ACP v2 has them, v1 has not
        self._requests = self._request_tables[version]
        self._notifications = self._notification_tables[version]

    # -- the runner's hooks -------------------------------------------------------------------

    def error_for(self, exc: Exception, method: str) -> RpcError:
        return to_rpc_error(exc, method)

    def closed_error(self, method: str, sent: bool) -> Exception:
        if sent:
            return ConnectionClosed(f"{method}: the client closed the connection before answering")
        return ConnectionClosed(f"{method}: the client has closed the connection")

    def answer_error(self, method: str, error: ErrorObject) -> Exception:
        data = None if error.data is UNSET else error.data
        return ClientError(method, error.code, error.message, data)

    def request_received(self, request: Request) -> bytes | None:
        peer = self.peer
        response = _dispatch(request.envelope, self._requests)
        if response is None:
            raise RuntimeError(f"jsonrpcserver did not answer the request {request.method}")
        if response.error is not None:
            # An unknown method, bad params, an inline handler's error.
            error = response.error
            if error.code == ParseError.CODE:
                # The params are not valid JSON text (say, invalid UTF-8 in a string): the
                # message as a whole is unparsable, so it is answered like any parse error.
                return peer.reject(request.id, ParseError(f"Parse error: {error.data}"))
            return peer.fail(request.id, error)
        call = response.result
        if not isinstance(call, Call):  # an inline handler's result
            return peer.answer(request.id, call)
        if self.max_inflight is not None and self.inflight_requests >= self.max_inflight:
            return peer.fail(
                request.id,
                TooManyRequests(
                    f"Too many requests in flight: this connection may have "
                    f"{self.max_inflight} at once; wait for an answer before sending more",
                    {"maxPendingRequests": self.max_inflight},
                ),
            )
        self.run_request(request.id, call.method, call)
        return None

    async def notification_received(self, notification: Notification) -> bytes | None:
        response = _dispatch(notification.envelope, self._notifications)
        error = response.error if response is not None else None
        if error is not None and error.code == ParseError.CODE:  # as for a request: unparsable
            return error_frame(None, ParseError(f"Parse error: {error.data}"))
        return None

    # -- sending ------------------------------------------------------------------------------

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
        raw = await self.call(method, params)
        try:
            return msgspec.json.decode(raw, type=result_type)
        except msgspec.DecodeError as exc:  # the client's answer, not our params, is wrong
            raise ClientError(method, InternalError.CODE, f"malformed result: {exc}") from None
