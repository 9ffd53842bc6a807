"""The sans-I/O JSON-RPC 2.0 peer both ends use: messages in, events out, frames out.

In the style of h11: a `Peer` does no I/O and knows nothing of tasks or time. The transport
frames the byte stream into messages (stdio lines, WebSocket text messages) and hands each to
`receive`, which returns what it is:

- `Request` / `Notification`: the other end calls us. The request is valid JSON-RPC (the one
  validation), its id is entered in the table of requests in flight, and it stays there until
  it is answered with `answer` or `fail` (or given up with `reject`); its params are left as
  `msgspec.Raw`, scanned, not decoded, for whoever knows their type.
- `Response` / `ErrorResponse`: the answer to one of our requests, found by id in the table of
  requests we sent (an answer nobody waits for is logged and dropped).
- `CancelRequested`: the other end's `$/cancel_request` naming a request of its own that is in
  flight (one for a request that is not is dropped).
- `Invalid`: the message is no JSON-RPC message; the event holds the frame that answers it
  (-32700 for what is not JSON text, -32600 for JSON that is no request, for a batch where
  batches are not taken, for an empty one, for a second request with an id still in flight,
  and for a message longer than the size limit).
- `Batch`: a JSON array of messages, on a peer that takes batches (`batches`, which ACP v2
  has and v1 has not): each element's event in order, an element that is no object being
  `Invalid` with a null id. Whoever answers them answers the batch's requests together, in
  one array (JSON-RPC 2.0's batch); a batch of notifications alone is answered by nothing.
- None: a blank message (between lines), or an answer nobody waits for.

Frames out: `answer`, `fail`, `request` (a new id of ours), `notify`, `cancel` (forgets one of
our requests and gives the `$/cancel_request` frame for it).

The size limit is in one place, `MAX_MESSAGE_BYTES`: the transport stops reading a longer
message and hands `Oversized` here, which the peer answers.
"""

from __future__ import annotations

import logging
from typing import Any, Final, NamedTuple

import msgspec
from msgspec import UNSET

from .errors import INTERNAL_ERROR, ErrorObject, InvalidRequest, ParseError, RpcError
from .wire import (
    Envelope,
    any_decoder,
    encode_frame,
    envelope_decoder,
    error_frame,
    notification_frame,
    request_frame,
    result_frame,
    valid_id,
)

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES: Final = 64 * 1024 * 1024
"""Largest accepted message (a stdio line without its newline, a WebSocket message)."""

CANCEL_REQUEST: Final = "$/cancel_request"

_TOO_DEEP: Final = ParseError("Parse error: JSON nested too deeply")
_NOT_UTF8: Final = ParseError("Parse error: Invalid UTF-8 encoded string")


class Oversized(msgspec.Struct, frozen=True):
    """A message crossed the size bound; the transport is discarding it."""

    limit: int


# ---------------------------------------------------------------------------------------------
# Events.


class Request(NamedTuple):
    """The other end's request; answer it with `Peer.answer` or `Peer.fail`."""

    id: Any
    method: str
    envelope: Envelope
    """The message as probed (jsonrpcserver's deserializer takes it as it is)."""

    @property
    def params(self) -> msgspec.Raw:
        return self.envelope.params


class Notification(NamedTuple):
    method: str
    envelope: Envelope

    @property
    def params(self) -> msgspec.Raw:
        return self.envelope.params


class Response(NamedTuple):
    """The result of one of our requests."""

    id: int
    method: str
    result: msgspec.Raw


class ErrorResponse(NamedTuple):
    """The error answer to one of our requests (a malformed error object is -32603)."""

    id: int
    method: str
    error: ErrorObject


class CancelRequested(NamedTuple):
    """The other end cancels its request `id`, which is in flight here."""

    id: Any


class Invalid(NamedTuple):
    """A message that is not one; `answer` is the frame to send back."""

    answer: bytes


class Batch(NamedTuple):
    """A batch's messages, each as the event it is (see the module's docstring)."""

    events: list[Request | Notification | Response | ErrorResponse | CancelRequested | Invalid]


Event = Request | Notification | Response | ErrorResponse | CancelRequested | Invalid | Batch


class _ErrorObject(msgspec.Struct, gc=False):
    code: int
    message: str
    data: Any = UNSET


class _CancelRequestParams(msgspec.Struct, rename="camel", gc=False):
    """`$/cancel_request` params (ACP's CancelRequestNotification); other keys are ignored."""

    request_id: int | str | None


_error_decoder: Final = msgspec.json.Decoder(_ErrorObject)
_batch_decoder: Final = msgspec.json.Decoder(list[msgspec.Raw])
_NOT_AN_OBJECT: Final = InvalidRequest("Invalid request: a batch element must be a JSON object")


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def check_envelope(envelope: Envelope) -> None:
    """The JSON-RPC 2.0 request shape, nothing more; raises `InvalidRequest` naming what is
    wrong. `jsonrpc` is "2.0", `method` a string, `id` (when present) a string, an integer or
    null, and `params` (when present) an object, an array or null."""
    if envelope.jsonrpc != "2.0":
        raise InvalidRequest('Invalid request: "jsonrpc" must be "2.0"')
    if type(envelope.method) is not str:
        raise InvalidRequest('Invalid request: "method" must be a string')
    if envelope.id is not UNSET and not valid_id(envelope.id):
        raise InvalidRequest('Invalid request: "id" must be a string, an integer or null')
    first = memoryview(envelope.params)[:1].tobytes() if envelope.params else b""
    if first and first not in b"{[n":  # object, array, null
        raise InvalidRequest('Invalid request: "params" must be an object or an array')


def _usable_id(envelope: Envelope) -> Any:
    """The id to answer an invalid message with: its own if that is a valid id, else null."""
    return envelope.id if envelope.id is not UNSET and valid_id(envelope.id) else None


class Peer:
    """One end of a JSON-RPC connection, without I/O: the id tables and the frames."""

    def __init__(self, first_id: int = 0) -> None:
        self._next_id = first_id
        self._outbound: dict[int, str] = {}  # our requests waiting for an answer: id -> method
        self._inbound: set[Any] = set()  # the other end's requests in flight (non-null ids)
        self.batches = False
        """Whether a JSON array is a batch of messages (else it is refused, one -32600)."""

    # -- in ---------------------------------------------------------------------------------

    def receive(self, message: bytes | Oversized) -> Event | None:
        """What one message is (see the module's docstring)."""
        if isinstance(message, Oversized):
            problem = (
                f"Invalid request: line longer than the {message.limit}-byte limit; it was skipped"
            )
            return Invalid(
                error_frame(None, InvalidRequest(problem, {"maxLineBytes": message.limit}))
            )
        if not message.strip():
            return None  # blank lines between messages carry nothing
        try:
            envelope = envelope_decoder.decode(message)
        except msgspec.ValidationError:
            batch = self._batch(message) if self.batches else None
            return batch if batch is not None else Invalid(self._non_object(message))
        except msgspec.DecodeError as exc:
            return Invalid(error_frame(None, ParseError(f"Parse error: {exc}")))
        except RecursionError:
            return Invalid(error_frame(None, _TOO_DEEP))
        if not message.isascii() and not _is_utf8(message):
            # msgspec checks the strings it decodes, not those it skips (unknown keys and their
            # values): a message that is not UTF-8 is not JSON text, wherever the bad bytes are.
            return Invalid(error_frame(None, _NOT_UTF8))
        if envelope.method is UNSET and (envelope.result or envelope.error):
            return self._response(envelope)
        try:
            check_envelope(envelope)
        except InvalidRequest as exc:
            return Invalid(error_frame(_usable_id(envelope), exc))
        request_id = envelope.id
        if request_id is UNSET:
            if envelope.method == CANCEL_REQUEST:
                return self._cancel_request(envelope)
            return Notification(envelope.method, envelope)
        if request_id is not None:
            if request_id in self._inbound:
                return Invalid(
                    error_frame(
                        request_id,
                        InvalidRequest(
                            "Invalid request: a request with this id is still in flight"
                        ),
                    )
                )
            self._inbound.add(request_id)
        return Request(request_id, envelope.method, envelope)

    def _batch(self, message: bytes) -> Batch | None:
        """The batch `message` is, or None when it is no array of JSON values, or `[]` (both
        answered as single messages)."""
        try:
            elements = _batch_decoder.decode(message)
        except (msgspec.DecodeError, RecursionError):
            return None
        if not elements:
            return None
        events: list[Any] = []
        for raw in elements:
            element = bytes(raw)
            if not element.lstrip().startswith(b"{"):
                events.append(Invalid(error_frame(None, _NOT_AN_OBJECT)))
                continue
            event = self.receive(element)
            if event is not None:
                events.append(event)
        return Batch(events)

    def _non_object(self, message: bytes) -> bytes:
        try:
            value = any_decoder.decode(message)
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

    def _response(self, envelope: Envelope) -> Response | ErrorResponse | None:
        request_id = envelope.id
        method = self._outbound.pop(request_id, None) if type(request_id) is int else None
        if method is None:
            log.warning(
                "dropped a response to request id %r: no request of ours is waiting for it",
                request_id,
            )
            return None
        if not envelope.error:
            return Response(request_id, method, envelope.result)
        try:
            error = _error_decoder.decode(envelope.error)
        except msgspec.DecodeError:
            return ErrorResponse(
                request_id, method, ErrorObject(INTERNAL_ERROR, "malformed error object")
            )
        return ErrorResponse(request_id, method, ErrorObject(error.code, error.message, error.data))

    def _cancel_request(self, envelope: Envelope) -> CancelRequested | Invalid | None:
        raw = envelope.params
        try:
            params = any_decoder.decode(raw) if raw else None
        except Exception as exc:  # as jsonrpcserver answers params it cannot deserialize
            return Invalid(error_frame(None, ParseError(f"Parse error: {exc}")))
        try:
            request = msgspec.convert({} if params is None else params, _CancelRequestParams)
        except msgspec.ValidationError as exc:
            # No answer can carry the error: say it here.
            log.warning("notification %s failed: Invalid params: %s", CANCEL_REQUEST, exc)
            return None
        if request.request_id is None or request.request_id not in self._inbound:
            log.debug("%s for %r: no such request in flight", CANCEL_REQUEST, request.request_id)
            return None
        return CancelRequested(request.request_id)

    # -- out --------------------------------------------------------------------------------

    def answer(self, request_id: Any, result: Any) -> bytes:
        """The result frame of the other end's request; it is no longer in flight."""
        self._inbound.discard(request_id)
        return result_frame(request_id, result)

    def fail(self, request_id: Any, error: RpcError | ErrorObject) -> bytes:
        """The error frame of the other end's request; it is no longer in flight."""
        self._inbound.discard(request_id)
        return error_frame(request_id, error)

    def reject(self, request_id: Any, error: RpcError) -> bytes:
        """Give up the other end's request as no message at all (its params turned out not to
        be JSON text): the error is answered with a null id, as for any unparsable message."""
        self._inbound.discard(request_id)
        return error_frame(None, error)

    def in_flight(self, request_id: Any) -> bool:
        """The other end's request `request_id` is not answered yet."""
        return request_id in self._inbound

    def request(self, method: str, params: Any = UNSET) -> tuple[int, bytes]:
        """A new request of ours: its id and its frame."""
        request_id = self._next_id
        self._next_id += 1
        self._outbound[request_id] = method
        return request_id, request_frame(request_id, method, params)

    def notify(self, method: str, params: Any = UNSET) -> bytes:
        return notification_frame(method, params)

    def cancel(self, request_id: int) -> bytes | None:
        """Forget our request `request_id` (a late answer is dropped): the `$/cancel_request`
        frame telling the other end, or None if no answer was awaited."""
        if self._outbound.pop(request_id, None) is None:
            return None
        return notification_frame(CANCEL_REQUEST, {"requestId": request_id})

    def close(self) -> list[tuple[int, str]]:
        """The other end is gone: forget our requests; the (id, method) of those unanswered."""
        pending = list(self._outbound.items())
        self._outbound.clear()
        return pending

    @property
    def pending(self) -> int:
        """Our requests waiting for an answer."""
        return len(self._outbound)


__all__ = [
    "MAX_MESSAGE_BYTES",
    "Batch",
    "CancelRequested",
    "ErrorResponse",
    "Event",
    "Invalid",
    "Notification",
    "Oversized",
    "Peer",
    "Request",
    "Response",
    "encode_frame",
]
