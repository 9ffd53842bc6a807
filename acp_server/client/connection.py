"""A small async ACP client for `acp-server`, over a spawned subprocess (anyio).

`AcpClient.spawn(...)` starts `python -m acp_server serve ...` and talks JSON-RPC 2.0 to it, one
JSON message per line:

- the connection is the package's JSON-RPC runner (`acp_server.jsonrpc`: the ids, the waiters,
  `$/cancel_request`) over the one subprocess driver (`ServerPipes`, bounded: a longer line
  fails loudly; stderr is kept as a bounded tail). Its reader hands each response to the
  request waiting for its id, dispatches notifications in wire order (a `session/update`
  reaches the caller of `prompt` or `load_session` before that call returns), and answers the
  server's own requests (`session/request_permission`, `fs/*`, `terminal/*`) through a
  user-supplied async callback, each in its own task;
- `async with AcpClient.spawn(...) as client:` closes the server's stdin on exit and waits for it
  to exit (killing it after a timeout).

On top of `request`, the ACP calls the demo and tests need (`initialize`, `new_session`,
`prompt`, `load_session`) and the history API of SPEC 3 (`page`, `follow`, `history`), which
returns exact events through the strict decoder and the `Journal`.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from pathlib import Path
from typing import Any, Final, NamedTuple

import anyio
import msgspec
from anyio.streams.memory import MemoryObjectSendStream
from msgspec import UNSET

from ..core.events import SessionEvent
from ..core.history import DEFAULT_MAX_MESSAGES, HistoryProtocolError, expand_history_records
from ..jsonrpc.errors import InternalError
from ..jsonrpc.peer import Invalid, Notification, Peer, Request
from ..jsonrpc.runner import Runner
from .errors import METHOD_NOT_FOUND, ConnectionClosed, RpcError
from .follow import Follow, walk_older
from .journal import Journal
from .process import PIPE_GONE, SERVE_COMMAND, ServerPipes, serve_command

log = logging.getLogger(__name__)

STDERR_TAIL_BYTES: Final = 64 * 1024
"""How much of the server's stderr is kept for diagnostics."""

Address = Mapping[str, str]
"""A `SessionAddress` as sent on the wire: see `session_address` and `subagent_address`."""

RequestHandler = Callable[[str, Any], Awaitable[Any]]
"""Answers one of the server's requests: (method, params) -> result; raise `RpcError` to fail."""

UpdateHandler = Callable[[Any], Awaitable[None] | None]
"""Receives one `session/update`'s `update` (sync or async)."""

NotificationHandler = Callable[[str, Any], Awaitable[None] | None]
"""Receives a notification nobody else took: (method, params) (sync or async)."""


def session_address(session_id: str) -> dict[str, str]:
    return {"kind": "session", "sessionId": session_id}


def subagent_address(parent_session_id: str, child_session_id: str) -> dict[str, str]:
    return {
        "kind": "subagent",
        "parentSessionId": parent_session_id,
        "childSessionId": child_session_id,
    }


async def answer_server_request(method: str, params: Any) -> Any:
    """The default answers: allow a permission once; refuse every other method (-32601)."""
    return default_answer(method, params)


def default_answer(method: str, params: Any) -> Any:
    """`answer_server_request` for blocking code."""
    if method == "session/request_permission":
        options = params.get("options", []) if isinstance(params, dict) else []
        chosen = next(
            (o["optionId"] for o in options if o.get("kind") == "allow_once"), "allow_once"
        )
        return {"outcome": {"outcome": "selected", "optionId": chosen}}
    raise RpcError(f"Method not found: {method}", code=METHOD_NOT_FOUND)


class Page(NamedTuple):
    """A `session.page` result: the records as sent, their exact events, `hasMore`, and the seq
    the page was cut at (the one asked for, else the server's answer)."""

    records: list[Any]
    events: list[SessionEvent]
    has_more: bool
    through_seq: int


class Loaded(NamedTuple):
    """What `session/load` sent: the replayed updates (in order) and its response's result."""

    updates: list[Any]
    response: Any


class _PipeSink:
    """The runner's `FrameSink` over the server's stdin: one message a line."""

    def __init__(self, pipes: ServerPipes) -> None:
        self._pipes = pipes

    async def send(self, frame: bytes) -> None:
        try:
            await self._pipes.send(frame + b"\n")
        except PIPE_GONE as exc:
            raise anyio.BrokenResourceError(f"the server's input is closed: {exc!r}") from None

    async def send_frames(self, frames: Iterable[bytes]) -> None:
        for frame in frames:
            await self.send(frame)

    def send_nowait(self, frame: bytes) -> None:
        raise anyio.WouldBlock  # a pipe write may wait: the runner sends it from a task


class AcpClient(Runner):
    """One JSON-RPC connection to a spawned `acp-server`. Make one with `AcpClient.spawn`."""

    def __init__(
        self, pipes: ServerPipes, on_request: RequestHandler = answer_server_request
    ) -> None:
        super().__init__(_PipeSink(pipes), Peer(first_id=1))
        self.pipes = pipes
        self.process = pipes.process
        self.on_request = on_request
        self.on_notification: NotificationHandler | None = None
        """Called for notifications no running call or follow takes."""
        self._update_handlers: dict[str, UpdateHandler] = {}
        self._follows: dict[str, MemoryObjectSendStream[tuple[str, Any]]] = {}
        self.on_close(self._end_follows)

    # -- lifetime ------------------------------------------------------------------------------

    @classmethod
    @contextlib.asynccontextmanager
    async def spawn(
        cls,
        *args: str,
        argv: Sequence[str] | None = None,
        sessions_dir: Path | str | None = None,
        env: Mapping[str, str] | None = None,
        on_request: RequestHandler = answer_server_request,
        shutdown_timeout: float = 10.0,
    ) -> AsyncIterator[AcpClient]:
        """Start the server (`argv`, default `python -m acp_server serve`, then
        `--sessions-dir` when given, then `args`) and connect to it.

        On exit its stdin is closed and it is given `shutdown_timeout` seconds to exit before it
        is killed; `client.process.returncode` is its exit status.
        """
        program = SERVE_COMMAND if argv is None else argv
        command = serve_command(sessions_dir, *args, program=program)
        error: Exception | None = None
        async with (
            ServerPipes.open(
                command, env=env, stderr_limit=STDERR_TAIL_BYTES, grace=shutdown_timeout
            ) as pipes,
            anyio.create_task_group() as task_group,
        ):
            client = cls(pipes, on_request)
            task_group.start_soon(client.serve, client._lines())
            try:
                yield client
            except Exception as exc:
                error = exc  # re-raised below as itself, not wrapped in the task group's group
            finally:
                with anyio.CancelScope(shield=True):
                    await pipes.shut_down(shutdown_timeout)
        if error is not None:
            raise error

    async def close_input(self) -> None:
        """Close the server's stdin: it finishes what it is doing and exits."""
        await self.pipes.close_input()

    @property
    def stderr(self) -> str:
        """The tail of what the server wrote to stderr."""
        return self.pipes.stderr

    # -- requests ------------------------------------------------------------------------------

    async def request(
        self, method: str, params: Any = None, *, on_result: Callable[[Any], None] | None = None
    ) -> Any:
        """Send a request and return its result; an error answer raises `RpcError`.

        `on_result` is called with the result by the reader, before any later frame is handled
        (`follow` uses it to route the notifications that follow the result). Cancelling the
        call sends the server `$/cancel_request` for it.
        """
        decoded: list[Any] = []

        def result_read(raw: msgspec.Raw) -> None:
            decoded.append(msgspec.json.decode(raw))
            if on_result is not None:
                on_result(decoded[0])

        raw = await self.call(method, UNSET if params is None else params, on_result=result_read)
        return decoded[0] if decoded else msgspec.json.decode(raw)

    async def notify(self, method: str, params: Any = None) -> None:
        try:
            await super().notify(method, UNSET if params is None else params)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise ConnectionClosed(str(exc)) from None

    def closed_error(self, method: str, sent: bool) -> Exception:
        if sent:
            return ConnectionClosed(
                f"{method}: the server's output ended before its answer; stderr:\n{self.stderr}"
            )
        return ConnectionClosed(f"{method}: the server's output has ended")

    def error_for(self, exc: Exception, method: str) -> RpcError:
        if isinstance(exc, RpcError):
            return exc
        log.error("answering the server's %s request failed", method, exc_info=exc)
        return InternalError()

    # -- reading -------------------------------------------------------------------------------

    async def _lines(self) -> AsyncIterator[bytes]:
        try:
            # At the end of output a torn last line is dropped: the server died.
            while (line := await self.pipes.receive_line()) is not None:
                yield line
        finally:
            self.close()

    def _end_follows(self) -> None:
        """Output has ended: end every follow."""
        for send in self._follows.values():
            send.close()
        self._follows.clear()

    def invalid_received(self, invalid: Invalid) -> bytes | None:
        # The server's output is not ours to correct: say what is wrong, send nothing.
        log.warning("ignoring a frame that is not a JSON-RPC message: %.300r", invalid.answer)
        return None

    def request_received(self, request: Request) -> bytes | None:
        """Answer one of the server's requests through `on_request`, in a task of its own."""
        params = _decoded(request.params)
        self.run_request(
            request.id, request.method, lambda: self.on_request(request.method, params)
        )
        return None

    async def notification_received(self, notification: Notification) -> bytes | None:
        """Notifications are handled one at a time, in wire order."""
        method, params = notification.method, _decoded(notification.params)
        if method in ("session.event", "session.followEnded"):
            if not isinstance(params, dict):
                log.warning("ignoring %s without params object: %.200r", method, params)
                return None
            subscription_id: Any = params.get("subscriptionId")
            send = self._follows.get(subscription_id)
            if method == "session.followEnded":
                self._follows.pop(subscription_id, None)  # its last frame
            if send is not None:
                with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                    send.send_nowait(
                        (method, params)
                    )  # unbounded: the reader never waits on a follower
            return None
        if method == "session/update" and isinstance(params, dict):
            session_id: Any = params.get("sessionId")
            handler = self._update_handlers.get(session_id)
            if handler is not None:
                await _call(handler, params.get("update"))
                return None
        if self.on_notification is not None:
            await _call(self.on_notification, method, params)
        return None

    # -- ACP -----------------------------------------------------------------------------------

    async def initialize(self, client_capabilities: Mapping[str, Any] | None = None) -> Any:
        return await self.request(
            "initialize",
            {"protocolVersion": 1, "clientCapabilities": dict(client_capabilities or {})},
        )

    async def new_session(self, cwd: Path | str, mcp_servers: Sequence[Any] = ()) -> str:
        """`session/new`; the new session's id."""
        result = await self.request(
            "session/new", {"cwd": str(cwd), "mcpServers": list(mcp_servers)}
        )
        session_id: str = result["sessionId"]
        return session_id

    async def prompt(
        self, session_id: str, prompt: str | Sequence[Any], on_update: UpdateHandler | None = None
    ) -> str:
        """`session/prompt` with a text or content blocks; the stop reason. `on_update` gets
        every `session/update` of the turn, in order, before this returns."""
        blocks = [{"type": "text", "text": prompt}] if isinstance(prompt, str) else list(prompt)
        with self._updates(session_id, on_update or _ignore):
            result = await self.request(
                "session/prompt", {"sessionId": session_id, "prompt": blocks}
            )
        stop_reason: str = result["stopReason"]
        return stop_reason

    async def load_session(
        self, session_id: str, cwd: Path | str, max_messages: int | None = None
    ) -> Loaded:
        """`session/load`: the replayed updates and the response's result. `max_messages`
        asks for only the newest messages (SPEC 4.2)."""
        params: dict[str, Any] = {"sessionId": session_id, "cwd": str(cwd), "mcpServers": []}
        if max_messages is not None:
            params["_meta"] = {"acp-server": {"replay": {"maxMessages": max_messages}}}
        updates: list[Any] = []
        with self._updates(session_id, updates.append):
            response = await self.request("session/load", params)
        return Loaded(updates, response)

    @contextlib.contextmanager
    def _updates(self, session_id: str, handler: UpdateHandler) -> Iterator[None]:
        previous = self._update_handlers.get(session_id)
        self._update_handlers[session_id] = handler
        try:
            yield
        finally:
            if previous is None:
                self._update_handlers.pop(session_id, None)
            else:
                self._update_handlers[session_id] = previous

    # -- history (SPEC 3) ----------------------------------------------------------------------

    async def page(
        self,
        address: Address,
        through_seq: int | None = None,
        before_seq: int | None = None,
        max_messages: int = DEFAULT_MAX_MESSAGES,
    ) -> Page:
        """`session.page`, its records expanded to exact events (malformed ones raise
        `HistoryProtocolError`). Without `through_seq`, the newest page: pass the `through_seq`
        it answers to the older pages, so that later appends never shift them."""
        params: dict[str, Any] = {"address": dict(address), "maxMessages": max_messages}
        if through_seq is not None:
            params["throughSeq"] = through_seq
        if before_seq is not None:
            params["beforeSeq"] = before_seq
        result = await self.request("session.page", params)
        if through_seq is None:
            through_seq = result.get("throughSeq")
            if type(through_seq) is not int:
                raise HistoryProtocolError(
                    "a session.page result without throughSeq, though the request left it out"
                )
        records = result["records"]
        return Page(records, expand_history_records(records), result["hasMore"], through_seq)

    async def follow(self, address: Address, max_messages: int = DEFAULT_MAX_MESSAGES) -> Follow:
        """`session.follow`: a `Follow` holding the snapshot, kept gapless from then on."""
        return await Follow.start(self, address, max_messages)

    async def history(
        self,
        address: Address,
        max_messages: int = DEFAULT_MAX_MESSAGES,
        through_seq: int | None = None,
    ) -> Journal:
        """The whole history through `through_seq` (default: the newest event), paged from the
        newest page to the oldest into one `Journal`."""
        if through_seq is None:
            follow = await self.follow(address, max_messages)
            await follow.aclose()  # only its snapshot, and its cursor, were wanted
            journal = follow.journal
        else:
            page = await self.page(address, through_seq, max_messages=max_messages)
            journal = Journal.from_page(page.records, page.has_more)
        await walk_older(self, address, journal, max_messages)
        return journal

    # -- for Follow (`FollowClient`) -----------------------------------------------------------

    def route_follow(
        self, subscription_id: str, send: MemoryObjectSendStream[tuple[str, Any]]
    ) -> None:
        """Send this subscription's frames to `send` (called by the reader, see `request`)."""
        if self.closed:
            send.close()
        else:
            self._follows[subscription_id] = send

    def unroute_follow(self, subscription_id: str | None) -> None:
        if subscription_id is not None:
            self._follows.pop(subscription_id, None)


async def _call(handler: Callable[..., Any], *args: Any) -> None:
    """Run a sync or async handler; its failure is logged, never the reader's end."""
    try:
        result = handler(*args)
        if inspect.isawaitable(result):
            await result
    except Exception:
        log.exception("a notification handler failed")


def _ignore(update: Any) -> None:
    pass


def _decoded(params: msgspec.Raw) -> Any:
    """A message's params as a JSON value (None when absent)."""
    return msgspec.json.decode(params) if params else None
