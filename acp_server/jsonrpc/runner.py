"""The anyio runner of a `Peer`: one task group per connection, waiters, cancel scopes.

`Runner.serve` reads the transport's messages in order and hands each to the peer; a subclass
says what to do with the other end's calls (`request_received`, `notification_received`):

- a request may be answered at once (a frame returned), or run in a task of its own with
  `run_request`, inside a cancel scope that the other end's `$/cancel_request` cancels; a
  cancelled request is answered -32800, so a long request never holds up anything else. Its
  handler runs up to its first wait before the next message is read: what it does at once
  (a prompt taking its place in a session's queue) comes before anything sent after it (a
  `session/cancel`), as the other end sent them;
- a notification is handled during the read, in wire order.

Our own requests (`call`) get ids from the peer; the answer is routed back by id to the
waiting caller. A cancelled caller forgets its request and tells the other end with
`$/cancel_request`; once input has ended, every waiter fails (`closed_error`).

At the end of input the close callbacks run, requests in flight get `shutdown_grace` seconds
to finish, and the rest (and the background tasks of `start_soon`) are cancelled.

Every frame goes out through one `FrameSink`, in the order it is sent: a handler's
notifications always reach the other end before its answer.

A batch (where the peer takes them) is handled as its messages would be, its requests running
concurrently as usual; their answers go out together, as one array frame, once the last is
answered (the handlers' notifications meanwhile go out as they come, each a frame of its own).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, Awaitable, Callable, Coroutine, Iterable
from typing import Any, NamedTuple, Protocol

import anyio
import msgspec
from anyio.abc import TaskGroup
from msgspec import UNSET

from .errors import ConnectionClosed, ErrorObject, InternalError, RequestCancelled, RpcError
from .peer import (
    Batch,
    CancelRequested,
    ErrorResponse,
    Event,
    Invalid,
    Notification,
    Oversized,
    Peer,
    Request,
    Response,
)
from .wire import error_frame

log = logging.getLogger(__name__)

_GONE = (anyio.ClosedResourceError, anyio.BrokenResourceError)


class FrameSink(Protocol):
    """Where whole messages go, in order, each framed by the transport as it needs (stdio's
    `LineSink`, a `WebSocketChannel`), or a memory stream in tests."""

    async def send(self, frame: bytes) -> None: ...

    async def send_frames(self, frames: Iterable[bytes]) -> None:
        """Send many frames, in order; they may be made as they are sent, off the event
        loop."""

    def send_nowait(self, frame: bytes) -> None:
        """Send without waiting; `anyio.WouldBlock` if that cannot be done now."""


class Then(NamedTuple):
    """A handler's result, what to do once the answer is queued for the other end, and what
    to do instead if it never is (the other end went, the request was cancelled, the result
    could not be encoded): exactly one of the two is called.

    `session.follow` uses it: its notifications must reach the client after its result.
    """

    result: Any
    after: Callable[[], None]
    unsent: Callable[[], None] | None = None


def _unsent(then: Then | None) -> None:
    if then is not None and then.unsent is not None:
        then.unsent()


class _Waiter:
    """One of our requests, waiting for its answer."""

    __slots__ = ("error", "event", "method", "on_result", "result")

    def __init__(self, method: str, on_result: Callable[[msgspec.Raw], None] | None) -> None:
        self.method = method
        self.on_result = on_result
        self.event = anyio.Event()
        self.result: msgspec.Raw | None = None
        self.error: BaseException | None = None


class _BatchAnswers:
    """The answers of one batch, sent together once every request of it is answered."""

    __slots__ = ("frames", "pending", "sealed", "thens")

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.thens: list[Then] = []
        self.pending = 0  # its requests running in tasks
        self.sealed = False  # every message of the batch has been read

    @property
    def complete(self) -> bool:
        return self.sealed and not self.pending

    def frame(self) -> bytes:
        return b"[" + b",".join(self.frames) + b"]"


class Runner:
    """A `Peer` over a transport: `serve` the inbound messages, `request` and `notify` out."""

    def __init__(self, sink: FrameSink, peer: Peer, *, shutdown_grace: float = 5.0) -> None:
        self.peer = peer
        self._sink = sink
        self.shutdown_grace = shutdown_grace
        self._inflight: dict[Any, anyio.CancelScope] = {}  # by id, for $/cancel_request
        self._scopes: set[anyio.CancelScope] = set()  # every running request, null ids too
        self._background: set[anyio.CancelScope] = set()  # every task of `start_soon`
        self._idle = anyio.Event()
        self._idle.set()
        self._waiters: dict[int, _Waiter] = {}
        self._closed = False
        self._task_group: TaskGroup | None = None
        self._reader_scope: anyio.CancelScope | None = None
        self._close_callbacks: list[Callable[[], None]] = []
        self._batch: _BatchAnswers | None = None  # the batch being read
        self._began: anyio.Event | None = None  # set once the request last run has begun

    # -- what a subclass says -----------------------------------------------------------------

    def request_received(self, request: Request) -> bytes | None:
        """The other end's request: a frame answering it now, or None once `run_request` runs
        it (or it is otherwise answered later)."""
        raise NotImplementedError

    async def notification_received(self, notification: Notification) -> bytes | None:
        """The other end's notification, during the read; a frame to send back, if any."""
        return None

    def invalid_received(self, invalid: Invalid) -> bytes | None:
        """A message that is no JSON-RPC message: the frame answering it, if any."""
        return invalid.answer

    def error_for(self, exc: Exception, method: str) -> RpcError:
        """The error answering a request whose handler raised `exc`."""
        if isinstance(exc, RpcError):
            return exc
        log.error("internal error in %s", method, exc_info=exc)
        return InternalError()

    def closed_error(self, method: str, sent: bool) -> Exception:
        """What a caller of `call` gets once the other end can no longer answer (`sent`:
        the request went out before that)."""
        if sent:
            return ConnectionClosed(f"{method}: the peer closed the connection before answering")
        return ConnectionClosed(f"{method}: the peer has closed the connection")

    def answer_error(self, method: str, error: ErrorObject) -> Exception:
        """What a caller of `call` gets when the other end answers with an error."""
        return RpcError(error.message, error.data, code=error.code)

    # -- state --------------------------------------------------------------------------------

    def on_close(self, callback: Callable[[], None]) -> None:
        """Call `callback` once input has ended (e.g. to cancel running turns)."""
        self._close_callbacks.append(callback)

    @property
    def pending_requests(self) -> int:
        """Our requests still waiting for an answer."""
        return len(self._waiters)

    @property
    def inflight_requests(self) -> int:
        """The other end's requests being handled in tasks."""
        return len(self._scopes)

    @property
    def closed(self) -> bool:
        return self._closed

    # -- sending ------------------------------------------------------------------------------

    async def notify(self, method: str, params: Any = UNSET) -> None:
        """Send a notification; it reaches the other end after every frame sent before it."""
        await self._sink.send(self.peer.notify(method, params))

    async def call(
        self,
        method: str,
        params: Any = UNSET,
        *,
        on_result: Callable[[msgspec.Raw], None] | None = None,
    ) -> msgspec.Raw:
        """Send a request and wait for its result, as JSON text (each end's `request`
        decodes it as it needs).

        Raises `answer_error` when the other end answers with an error and `closed_error`
        when it can no longer answer. `on_result` is called with the result by the reader,
        before any later message is handled. Cancelling the caller forgets the request (a late
        answer is dropped) and sends the other end `$/cancel_request` for it.
        """
        if self._closed:
            raise self.closed_error(method, False)
        request_id, frame = self.peer.request(method, params)
        waiter = _Waiter(method, on_result)
        self._waiters[request_id] = waiter
        sent = False
        try:
            try:
                await self._sink.send(frame)
            except _GONE:
                raise ConnectionClosed(f"{method}: the connection is closed") from None
            sent = True
            await waiter.event.wait()
        except BaseException:
            # Whatever ends the wait (cancellation above all), the entry goes: nothing leaks.
            if self._waiters.pop(request_id, None) is not None:
                cancel = self.peer.cancel(request_id)
                if cancel is not None and sent and not self._closed:
                    self._send_courtesy(cancel, request_id)
            raise
        if waiter.error is not None:
            raise waiter.error
        assert waiter.result is not None
        return waiter.result

    def _send_courtesy(self, frame: bytes, request_id: int) -> None:
        # Without waiting: the caller is being cancelled, so it cannot block on a full output
        # buffer; if the frame cannot leave now it leaves from a task, and a lost courtesy
        # notification costs nothing.
        try:
            self._sink.send_nowait(frame)
            return
        except anyio.WouldBlock:
            pass
        except _GONE:
            log.debug("could not send $/cancel_request for %s", request_id)
            return
        if self._task_group is not None:
            self._task_group.start_soon(self._send_quietly, frame)

    async def _send_quietly(self, frame: bytes) -> None:
        try:
            await self._sink.send(frame)
        except (*_GONE, ConnectionClosed):
            log.debug("could not send a frame: the output is closed")

    # -- receiving ----------------------------------------------------------------------------

    async def serve(self, messages: AsyncIterable[bytes | Oversized]) -> None:
        """Handle every inbound message until their end (or `stop()`), then shut down.

        `messages` is the transport's framing (stdio lines, WebSocket text messages): one
        JSON-RPC message each, or `Oversized` for one the transport skipped; reading also ends
        when an answer cannot be sent. Then every waiter fails, requests in flight get
        `shutdown_grace` seconds to finish, the rest (and the background tasks) are cancelled
        (the requests answered -32800), and this returns when no handler is left.
        """
        async with anyio.create_task_group() as task_group:
            self._task_group = task_group
            with anyio.CancelScope() as self._reader_scope:
                async for message in messages:
                    frame = await self._receive_safely(message)
                    if frame is not None:
                        try:
                            await self._sink.send(frame)
                        except _GONE:
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
        because the other end went ends it quietly."""
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
            except _GONE:
                log.debug("output closed under %s", getattr(task, "__qualname__", task))
            finally:
                self._background.discard(scope)

    def stop(self) -> None:
        """Stop reading input (e.g. on SIGTERM) and shut down as at end of input."""
        if self._reader_scope is not None:
            self._reader_scope.cancel()

    def close(self) -> None:
        """Input has ended: run the close callbacks, fail every waiter."""
        if self._closed:
            return
        self._closed = True
        for callback in self._close_callbacks:
            try:
                callback()
            except Exception:
                log.exception("close callback failed")
        self.peer.close()
        waiters, self._waiters = self._waiters, {}
        for waiter in waiters.values():
            waiter.error = self.closed_error(waiter.method, True)
            waiter.event.set()
        if waiters:
            log.info("end of input: %d outbound request(s) left unanswered", len(waiters))

    async def _receive_safely(self, message: bytes | Oversized) -> bytes | None:
        try:
            event = self.peer.receive(message)
            if isinstance(event, Batch):
                await self._receive_batch(event)
                return None
            return await self._receive(event)
        except Exception:
            # A bug here must cost one message, never the connection.
            log.exception("internal error while reading a message")
            return error_frame(None, InternalError("Internal error while reading a message"))

    async def _receive_batch(self, batch: Batch) -> None:
        answers = self._batch = _BatchAnswers()
        try:
            for event in batch.events:
                try:
                    frame = await self._receive(event)
                except Exception:
                    log.exception("internal error while reading a message of a batch")
                    frame = error_frame(
                        None, InternalError("Internal error while reading a message")
                    )
                if frame is not None:
                    answers.frames.append(frame)
        finally:
            self._batch = None
        answers.sealed = True
        if answers.complete and answers.frames:
            try:
                await self._send_batch(answers)
            except _GONE:  # as for a request's answer: the next answer ends the reading
                log.debug("output closed before the answers of a batch")

    async def _send_batch(self, answers: _BatchAnswers) -> None:
        try:
            await self._sink.send(answers.frame())
        except _GONE:
            for then in answers.thens:
                _unsent(then)
            raise
        for then in answers.thens:
            then.after()

    async def _deliver(
        self, answers: _BatchAnswers | None, frame: bytes, then: Then | None
    ) -> None:
        """Send a request's answer, or keep it for its batch's array (sent with the last)."""
        if answers is None:
            try:
                await self._sink.send(frame)
            except _GONE:
                _unsent(then)
                raise
            if then is not None:
                then.after()
            return
        answers.frames.append(frame)
        if then is not None:
            answers.thens.append(then)
        answers.pending -= 1
        if answers.complete:
            await self._send_batch(answers)

    async def _receive(self, event: Event | None) -> bytes | None:
        """What one message (not a batch) is answered with now, if anything."""
        if isinstance(event, Request):
            frame = self.request_received(event)
            began, self._began = self._began, None
            if began is not None:
                await began.wait()  # its handler has run up to its first wait
            return frame
        if isinstance(event, Notification):
            return await self.notification_received(event)
        if isinstance(event, Invalid):
            return self.invalid_received(event)
        if isinstance(event, (Response, ErrorResponse)):
            self._answered(event)
        elif isinstance(event, CancelRequested):
            self.cancel_request(event.id)
        return None

    def _answered(self, event: Response | ErrorResponse) -> None:
        waiter = self._waiters.pop(event.id, None)
        if waiter is None:  # its caller was cancelled as the answer came
            return
        if isinstance(event, ErrorResponse):
            waiter.error = self.answer_error(event.method, event.error)
        else:
            waiter.result = event.result
            if waiter.on_result is not None:
                waiter.on_result(event.result)
        waiter.event.set()

    def cancel_request(self, request_id: Any) -> bool:
        """Cancel the other end's request in flight; False if there is none by that id."""
        scope = self._inflight.get(request_id) if self.peer.in_flight(request_id) else None
        if scope is None:
            return False
        scope.cancel()
        return True

    # -- running the other end's requests -----------------------------------------------------

    def run_request(self, request_id: Any, method: str, call: Callable[[], Awaitable[Any]]) -> None:
        """Run `call` in a task of its own and answer `request_id` with what it returns (or
        raises); `$/cancel_request` for the id cancels it."""
        task_group = self._task_group
        if task_group is None:
            raise RuntimeError("a request arrived outside serve()")
        scope = anyio.CancelScope()
        if request_id is not None:
            self._inflight[request_id] = scope
        if not self._scopes:
            self._idle = anyio.Event()
        self._scopes.add(scope)
        answers = self._batch
        if answers is not None:
            answers.pending += 1
        self._began = began = anyio.Event()
        task_group.start_soon(self._run, request_id, method, call, scope, began, answers)

    async def _run(
        self,
        request_id: Any,
        method: str,
        call: Callable[[], Awaitable[Any]],
        scope: anyio.CancelScope,
        began: anyio.Event,
        answers: _BatchAnswers | None = None,
    ) -> None:
        frame: bytes | None = None
        then: Then | None = None
        began.set()  # the reader goes on once `call` waits (nothing runs in between)
        try:
            with scope:
                try:
                    result = await call()
                except Exception as exc:
                    frame = self.peer.fail(request_id, self.error_for(exc, method))
                else:
                    if isinstance(result, Then):
                        then, result = result, result.result
                    frame = self.peer.answer(request_id, result)
            if frame is None:  # cancelled by $/cancel_request or at shutdown
                frame = self.peer.fail(request_id, RequestCancelled("Request cancelled"))
                _unsent(then)
                then = None
            await self._deliver(answers, frame, then)
        except _GONE:
            log.debug("output closed before the answer to %r", request_id)
        except msgspec.EncodeError:  # a handler returned something unencodable: a bug
            log.exception("cannot encode the result of %s", method)
            _unsent(then)
            failed = self.peer.fail(
                request_id, InternalError(f"Internal error while handling {method}")
            )
            await self._deliver(answers, failed, None)
        finally:
            if self._inflight.get(request_id) is scope:
                del self._inflight[request_id]
            self._scopes.discard(scope)
            if not self._scopes:
                self._idle.set()
