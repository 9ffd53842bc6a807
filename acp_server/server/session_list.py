"""The live session list (SPEC 3.5): `session.list.follow`, `session.listChanged`,
`session.list.unfollow`.

A follower is answered with every session its filter keeps (`cwd`, archived ones only with
`includeArchived`), newest first, each as `session/list` shows it (`SessionInfo`) plus
`running` (a prompt turn runs in it in this process) and `_meta["acp-server"]`
(`createdAt`, and the running turn's number). Then each change is a `session.listChanged`:
`created` for a session that joins the list, `updated` for one shown differently (title, last
activity, running or idle, archived), `deleted` for one that leaves it (deleted, or archived
when the list leaves those out: its `archived` says which).

A subscription sends the difference between what it last sent and the list as it is now, so it
needs no buffer: a client that reads slowly gets fewer changes, never an unbounded queue. The
list is read again from the store (`SessionRegistry.list_all`, a listing's work, not the
sessions' logs) at once when this process changes a session (an event, a session going live,
a turn ending, a deletion), at most every `LIST_SETTLE_S`, and every `LIST_POLL_S` for what
other processes write to the store.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any, Final

import anyio
import msgspec
from msgspec import UNSET, UnsetType, field

from ..core.content import Meta_
from ..core.events import AssistantChunk, SessionEvent
from ..core.structs import Model
from ..storage.api import ListedSession
from .errors import InvalidParams, echoed
from .listing import ListChange, ListEntry, iso_time, list_changes, select_page, session_info
from .live import LiveSession
from .params import check_absolute
from .protocol import Empty, Inbound, SessionInfo
from .rpc import Connection, Then
from .sessions import SessionRegistry

log = logging.getLogger(__name__)

LIST_POLL_S: Final = 1.0
"""How often a followed list is read again for what other processes changed."""

LIST_SETTLE_S: Final = 0.1
"""The least time between two readings of a followed list (changes in between are sent
together)."""


class FollowedSession(SessionInfo, kw_only=True):
    """A session of a followed list: `SessionInfo`, and whether a prompt turn runs in it."""

    running: bool


class ListFollowParams(Inbound):
    cwd: str | UnsetType | None = UNSET
    include_archived: bool = False
    meta: Meta_ = field(default=UNSET, name="_meta")


class ListFollowResult(Model):
    subscription_id: str
    sessions: list[FollowedSession]


class ListUnfollowParams(Inbound):
    subscription_id: str


class ListChangedParams(Model):
    subscription_id: str
    change: ListChange
    session: FollowedSession


class _Subscription:
    def __init__(self, cwd: str | None, include_archived: bool) -> None:
        self.id = uuid.uuid4().hex
        self.cwd = cwd
        self.include_archived = include_archived
        self.shown: dict[str, FollowedSession] = {}
        """What the client was last told, by session id."""
        self.wake = anyio.Event()
        self.scope = anyio.CancelScope()


def followed(entry: ListEntry, listed: ListedSession, live: LiveSession | None) -> FollowedSession:
    """One session as a followed list shows it; a session live here is shown as its events
    in memory say (its last ones may not be stored yet)."""
    info = session_info(entry, listed)
    ours: dict[str, Any] = {"createdAt": iso_time(entry.created_at)}
    running = live is not None and live.turn is not None
    if live is not None and live.turn is not None:
        ours["turn"] = live.turn.number
    if live is not None and live.log.length and isinstance(info.updated_at, str):
        last = live.log.events(live.log.length - 1)[-1].time
        info.updated_at = max(info.updated_at, iso_time(last))
    fields = msgspec.structs.asdict(info)
    fields["meta"] = {"acp-server": ours}
    return FollowedSession(**fields, running=running)


class SessionList:
    """The list subscriptions of one connection."""

    def __init__(self, connection: Connection, sessions: SessionRegistry) -> None:
        self.connection = connection
        self.sessions = sessions
        self._subscriptions: dict[str, _Subscription] = {}

    def install(self) -> None:
        route = self.connection.route
        route("session.list.follow", self.follow, ListFollowParams)
        route("session.list.unfollow", self.unfollow, ListUnfollowParams)
        self.sessions.event_listeners.append(self._event)
        self.sessions.deletion_listeners.append(self._wake_all)
        self.sessions.change_listeners.append(self._wake_all)
        self.connection.on_close(self._close_all)

    async def follow(self, request: ListFollowParams) -> Then:
        cwd = request.cwd if isinstance(request.cwd, str) else None
        if cwd is not None:
            check_absolute(cwd, "$.cwd")
        subscription = _Subscription(cwd, request.include_archived)
        # Listening before the first reading: a change made meanwhile wakes the first look.
        self._subscriptions[subscription.id] = subscription
        try:
            subscription.shown, _ = await self._read(subscription)
        except BaseException:
            del self._subscriptions[subscription.id]
            raise
        result = ListFollowResult(subscription.id, list(subscription.shown.values()))
        return Then(result, lambda: self._start(subscription))

    async def unfollow(self, request: ListUnfollowParams) -> Empty:
        subscription = self._subscriptions.pop(request.subscription_id, None)
        if subscription is None:
            raise InvalidParams.at(
                "$.subscriptionId", f"no subscription {echoed(request.subscription_id)}"
            )
        subscription.scope.cancel()
        return Empty()

    def _start(self, subscription: _Subscription) -> None:
        if subscription.id in self._subscriptions:
            self.connection.start_soon(self._run, subscription)

    async def _run(self, subscription: _Subscription) -> None:
        with subscription.scope:
            while True:
                with anyio.move_on_after(LIST_POLL_S):
                    await subscription.wake.wait()
                subscription.wake = anyio.Event()
                await self._look(subscription)
                await anyio.sleep(LIST_SETTLE_S)

    async def _look(self, subscription: _Subscription) -> None:
        try:
            shown, present = await self._read(subscription)
        except Exception as exc:  # a store that failed once may answer the next look
            log.warning("the session list could not be read: %s", exc)
            return
        changes = list_changes(subscription.shown, shown, present)
        subscription.shown = shown
        if changes:
            await self.connection.notify_all(
                "session.listChanged",
                [ListChangedParams(subscription.id, change, s) for change, s in changes],
            )

    async def _read(
        self, subscription: _Subscription
    ) -> tuple[dict[str, FollowedSession], dict[str, FollowedSession]]:
        """The list the subscription shows now (newest first), and every session listed."""
        listed = await self.sessions.list_all()
        live = self.sessions.live
        present = {
            entry.session_id: followed(entry, item, live.get(entry.session_id))
            for entry, item in listed
        }
        entries = [
            entry for entry, item in listed if subscription.include_archived or not item.archived
        ]
        chosen, _ = select_page(entries, cwd=subscription.cwd, after=None, page_size=len(entries))
        return {entry.session_id: present[entry.session_id] for entry in chosen}, present

    def _event(self, session_id: str, event: SessionEvent) -> None:
        if type(event) is not AssistantChunk:  # a streamed piece: its message follows
            self._wake_all(session_id)

    def _wake_all(self, session_id: str) -> None:
        for subscription in self._subscriptions.values():
            subscription.wake.set()

    def _close_all(self) -> None:
        for subscription in self._subscriptions.values():
            subscription.scope.cancel()
        self._subscriptions.clear()
        self.sessions.event_listeners.remove(self._event)
        self.sessions.deletion_listeners.remove(self._wake_all)
        self.sessions.change_listeners.remove(self._wake_all)
