"""The clients attached to a live session, and the port a turn reaches them through.

Every connection that creates, resumes or loads a session is attached to it (`Attached`). The
client whose prompt runs gets the turn's stream exactly as a single client does; every other
attached client gets the same `session/update`s, queued in order per client and sent from a
task of its connection (`Attached.post`), less the kinds it did not advertise. A client being
attached by `session/load` is held while its replay goes out: the updates of a running turn
wait behind it, so the replay and the live stream meet with no gap and no repeat.

`SessionPort` is the turn's `ClientPort`: notifications to the prompting client and mirrored to
the others; `session/request_permission` to every attached client at once (the first answer
wins, the other requests are withdrawn with `$/cancel_request`), and with none attached it
waits for one up to the detached permission timeout; every other request (`fs/*`,
`terminal/*`, elicitation) to the prompting client only, and once it has gone the turn is
served as for a client without those capabilities (local files and commands).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, Final, Literal, Protocol

import anyio

from ..agent import ports
from ..core.acp_updates import (
    V2_ONLY,
    CompactionShown,
    CompactionSummaryChunk,
    NoticeShown,
    PlanRemoved,
    PlanUpdated,
    SessionMessageShown,
    SessionNotification,
    SessionUpdate,
    StateShown,
    SubagentUpdated,
    ToolCallStarted,
    ToolCallUpdated,
)
from .errors import ConnectionClosed

log = logging.getLogger(__name__)

DEFAULT_DETACHED_PERMISSION_TIMEOUT: Final = 600.0
"""Seconds a permission request waits for a client to attach when none is (the default of
`--detached-permission-timeout`)."""

DETACHED: Final = ports.ClientCapabilities()
"""What a turn whose prompting client has gone may ask of a client: nothing but permission."""

PERMISSION: Final = "session/request_permission"

WAITS_FOR_USER: Final = (PERMISSION, "elicitation/create")
"""The requests during which the session's foreground work waits for the user
(`requires_action`, and `running` again once answered)."""

CLIENT_GONE: Final = (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionClosed)


def shown_to(caps: ports.ClientCapabilities, note: SessionNotification, session_id: str) -> bool:
    """Whether a client with `caps` may be sent `note` of the session `session_id`: the
    updates a client opts into (notices, compactions, plan operations, subagents) only to one
    that advertised them."""
    update = note.update
    kind = type(update)
    if note.session_id != session_id or kind in (SubagentUpdated, SessionMessageShown):
        return caps.subagents
    if kind is NoticeShown:
        return caps.notices
    if kind in (CompactionShown, CompactionSummaryChunk):
        return caps.compaction
    if kind in (PlanUpdated, PlanRemoved):
        return caps.plan_operations
    if kind in V2_ONLY:
        return caps.shows_state
    return True


class Attached:
    """One client attached to a live session: its port, and the session's updates on their
    way to it when they are not the stream of its own turn."""

    def __init__(
        self,
        port: ports.ClientPort,
        start_soon: Callable[[Callable[[], Coroutine[Any, Any, None]]], None],
    ) -> None:
        self.port = port
        self._start_soon = start_soon
        self._outbox: list[SessionNotification] = []
        self._held = False
        self._pumping = False
        self._replayed_calls: set[str] = set()
        """The tool calls its replay announced: a call stored before the replay read the log
        but announced live only after is not announced to it again."""

    def hold(self) -> None:
        """Keep what is posted until `release` (a load's replay is going out)."""
        self._held = True

    def restart(self) -> None:
        """Drop what was posted so far (a load's replay, read now, holds it)."""
        self._outbox.clear()

    def replayed(self, updates: Iterable[SessionUpdate]) -> None:
        """The replay sent `updates`: the calls it announced that had not finished yet are
        not announced again (each once: a later call may reuse an id)."""
        shown = list(updates)
        finished = {u.tool_call_id for u in shown if type(u) is ToolCallUpdated}
        self._replayed_calls.update(
            u.tool_call_id
            for u in shown
            if type(u) is ToolCallStarted and u.tool_call_id not in finished
        )

    def release(self) -> None:
        self._held = False
        self._kick()

    def post(self, notes: Iterable[SessionNotification], session_id: str) -> None:
        """Queue `notes` for this client (those its capabilities take), in order; sent soon."""
        caps = self.port.capabilities
        self._outbox.extend(n for n in notes if shown_to(caps, n, session_id))
        self._kick()

    def _kick(self) -> None:
        if self._held or self._pumping or not self._outbox:
            return
        self._pumping = True
        try:
            self._start_soon(self._pump)
        except ConnectionClosed:  # the connection is going: nobody to send them to
            self._pumping = False
            self._outbox.clear()

    async def _pump(self) -> None:
        try:
            while self._outbox and not self._held:
                batch, self._outbox = self._outbox, []
                if self._replayed_calls:
                    batch = [n for n in batch if not self._announced(n.update)]
                await self.port.notify_all("session/update", batch)
        finally:
            self._pumping = False

    def _announced(self, update: SessionUpdate) -> bool:
        if type(update) is ToolCallStarted and update.tool_call_id in self._replayed_calls:
            self._replayed_calls.discard(update.tool_call_id)
            return True
        return False


class SharedSession(Protocol):
    """What a session's clients are reached through (`live.LiveSession`)."""

    @property
    def id(self) -> str: ...

    clients: dict[ports.ClientPort, Attached]
    attached: anyio.Event
    """Set when a client attaches (then replaced)."""
    waiting_for_user: int
    """How many requests of its running turn wait for the user."""

    def mirror(self, notes: Iterable[SessionNotification], source: ports.ClientPort) -> None:
        """Send `notes` to every attached client but `source`."""


class SessionPort:
    """A turn's `ClientPort` (see the module docstring): the prompting client's `port` (also
    its key in `session.clients`), and every other client attached to the session."""

    def __init__(
        self,
        session: SharedSession,
        port: ports.ClientPort,
        permission_timeout: float = DEFAULT_DETACHED_PERMISSION_TIMEOUT,
    ) -> None:
        self._session = session
        self._prompter = port
        self._port = port
        self._permission_timeout = permission_timeout

    def _attached(self) -> bool:
        return self._prompter in self._session.clients

    @property
    def capabilities(self) -> ports.ClientCapabilities:
        return self._port.capabilities if self._attached() else DETACHED

    async def notify(self, method: str, params: Any) -> None:
        if method == "session/update":
            self._session.mirror([params], self._prompter)  # before any await: in log order
        if self._attached():
            try:
                await self._port.notify(method, params)
            except CLIENT_GONE:
                log.debug("session %s: its prompting client has gone", self._session.id)

    async def notify_all(self, method: str, params: Iterable[Any]) -> None:
        notes = list(params)
        if method == "session/update":
            self._session.mirror(notes, self._prompter)
        if self._attached():
            try:
                await self._port.notify_all(method, notes)
            except CLIENT_GONE:
                log.debug("session %s: its prompting client has gone", self._session.id)

    async def request(self, method: str, params: Any) -> Any:
        if method not in WAITS_FOR_USER:
            return await self._request(method, params)
        self._session.waiting_for_user += 1  # a resume's state says `requires_action`
        try:
            await self._show_state("requires_action")
            try:
                answer = await self._request(method, params)
            except anyio.get_cancelled_exc_class():
                raise  # the turn ends: its idle says so
            except BaseException:
                await self._show_state("running")
                raise
        finally:
            self._session.waiting_for_user -= 1
        await self._show_state("running")
        return answer

    async def _show_state(self, state: Literal["running", "requires_action"]) -> None:
        await self.notify(
            "session/update", SessionNotification(self._session.id, StateShown(state))
        )

    async def _request(self, method: str, params: Any) -> Any:
        if method == PERMISSION:
            return await ask_attached(self._session, method, params, self._permission_timeout)
        if not self._attached():
            raise ports.ClientRequestError(
                method, -32000, "the client that sent the prompt has gone"
            )
        return await self._port.request(method, params)


async def ask_attached(
    session: SharedSession, method: str, params: Any, detached_for: float
) -> Any:
    """Send the request to every client attached to `session`, and to each that attaches
    while it waits; the first answer wins and the other requests are withdrawn (cancelled:
    their connections send `$/cancel_request`). With no client attached for `detached_for`
    seconds, `ports.RequestTimedOut`. When every client attached was asked and none could
    answer, the last error answered is raised; a client whose connection went is as if it had
    never been asked."""
    answers: list[Any] = []
    failures: list[Exception] = []
    asked: set[object] = set()
    pending = 0
    changed = anyio.Event()

    async def ask(link: Attached) -> None:
        nonlocal pending, changed
        try:
            answers.append(await link.port.request(method, params))
        except ports.ClientRequestError as exc:
            failures.append(exc)
        except CLIENT_GONE:
            log.debug("session %s: a client went before it answered %s", session.id, method)
        finally:
            pending -= 1
            changed.set()

    failed: Exception | None = None
    async with anyio.create_task_group() as asking:
        while not answers:
            for key, link in list(session.clients.items()):
                if key not in asked:
                    asked.add(key)
                    pending += 1
                    asking.start_soon(ask, link)
            if pending == 0 and failures and session.clients:
                failed = failures[-1]  # everyone attached was asked, and none could answer
                break
            waiting, attached = changed, session.attached
            if pending == 0:
                with anyio.move_on_after(detached_for) as waited:
                    await attached.wait()
                if waited.cancelled_caught:
                    failed = ports.RequestTimedOut(method, detached_for)
                    break
                continue
            async with anyio.create_task_group() as either:

                async def until(event: anyio.Event, scope: anyio.CancelScope) -> None:
                    await event.wait()
                    scope.cancel()

                either.start_soon(until, waiting, either.cancel_scope)
                either.start_soon(until, attached, either.cancel_scope)
            if waiting.is_set():
                changed = anyio.Event()
        asking.cancel_scope.cancel()
    if failed is not None:
        raise failed
    return answers[0]
