"""The history API (SPEC 3): `session.page`, `session.follow`, `session.unfollow`, and
`session.search` (SPEC 3.5, its work `search`'s) over the same session addresses.

A session live in this process is paged from its in-memory `EventLog` (which includes what is
not yet flushed); any other is paged from the store's `HistorySource`, which reads only what a
page shows.

Followers get every event a session appends as a `session.event` notification, in seq order,
after the snapshot the `session.follow` result holds: the events of a session live here as it
appends them, those another process writes (SPEC 2.6) from the store, looked for every
`FOLLOW_POLL_S` while the session is not live here. Each subscription has a bounded
buffer; one that falls too far behind is ended with `session.followEnded` after the events
already buffered, so the client always knows the last seq it was sent. Deleting a session ends
its subscriptions the same way, with reason "deleted"; a `session.follow` that meets the
deletion half way (sent right after the `session/delete`) is refused as an unknown session, or
gets its result then that `followEnded`: it is never left open on a session that is gone. A
live session whose log failed to write drops, once re-read, the events it had not stored: a
subscription that had taken any of them is ended with reason "rewound" and the last stored seq
it sent, and none of what it still buffered is sent.

The buffer holds `FOLLOW_BUFFER` events: 10,000, or the value of the environment variable
`ACP_SERVER_FOLLOW_BUFFER` (a non-negative integer), read once when this module is imported. It
exists so that tests can force an overflow without huge streams; an invalid value is ignored
with a warning.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any, Final

import anyio
import msgspec
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from msgspec import UNSET, UnsetType

from ..core.chunk_rows import StorageRecord, decode_storage_record
from ..core.event_log import EventLog
from ..core.events import SessionEvent, SubagentStart
from ..core.header import SessionHeader
from ..core.history import (
    FollowEndedParams,
    FollowEndReason,
    FollowParams,
    FollowResult,
    PageParams,
    PageResult,
    SearchParams,
    SearchResult,
    SessionAddressed,
    SessionEventParams,
    UnfollowParams,
    to_history_records,
)
from ..core.ids import InvalidSessionId, validate_session_id
from ..core.paging import PageCut
from ..storage.api import FOLLOW_POLL_S, HistorySource, Watch
from ..storage.errors import SessionNotFound
from .errors import InvalidParams, UnknownSession, echoed
from .held_history import HeldHistory
from .protocol import Empty
from .rpc import Connection, Then
from .sessions import SessionRegistry
from .tunables import env_int

log = logging.getLogger(__name__)

FOLLOW_BUFFER_ENV: Final = "ACP_SERVER_FOLLOW_BUFFER"
DEFAULT_FOLLOW_BUFFER: Final = 10_000


FOLLOW_BUFFER: Final = env_int(FOLLOW_BUFFER_ENV, DEFAULT_FOLLOW_BUFFER, minimum=0)
"""Events a follower may fall behind by before its subscription is ended."""


class _Resolved(msgspec.Struct):
    session_id: str
    header: SessionHeader
    source: EventLog | HistorySource
    """A live session's events, or the stored session."""


class _Subscription(msgspec.Struct):
    id: str
    session_id: str
    send: MemoryObjectSendStream[SessionEvent]
    receive: MemoryObjectReceiveStream[SessionEvent]
    next_seq: int
    """The seq the next event taken must have."""
    last_sent: int = -1
    """The seq of the last event the client was sent (the snapshot's cursor at first)."""
    end_reason: FollowEndReason | None = None
    stored_until: int | None = None
    """With reason "rewound": the seq from which the events taken were never stored."""
    delivering: bool = False
    backlog: list[SessionEvent] = msgspec.field(default_factory=list)


class History:
    def __init__(self, connection: Connection, sessions: SessionRegistry) -> None:
        self.connection = connection
        self.sessions = sessions
        self._subscriptions: dict[str, _Subscription] = {}
        self._by_session: dict[str, dict[str, _Subscription]] = {}

    def install(self) -> None:
        route = self.connection.route
        route("session.page", self.page, PageParams)
        route("session.follow", self.follow, FollowParams)
        route("session.unfollow", self.unfollow, UnfollowParams)
        route("session.search", self.search, SearchParams)
        self.sessions.event_listeners.append(self._publish)
        self.sessions.deletion_listeners.append(self._deleted)
        self.sessions.rewind_listeners.append(self._rewound)
        self.connection.on_close(self._close_all)

    # -- session.page --------------------------------------------------------------------------

    async def page(self, request: PageParams) -> PageResult:
        resolved = await self._resolve(request.address)
        last = resolved.source.last_seq
        through = request.through_seq
        if isinstance(through, int) and through > last:
            raise InvalidParams.at(
                "$.throughSeq", f"{through} is past the session's last seq {last}"
            )
        end = (last if isinstance(through, UnsetType) else through) + 1
        if isinstance(request.before_seq, int):
            end = min(end, request.before_seq)
        cut, records = await self._page(resolved, end, request.max_messages)
        # Left out, the seq it stands for is answered: the client pages on through it.
        answered = last if isinstance(through, UnsetType) else UNSET
        return PageResult(to_history_records(records), cut.has_more, answered)

    async def _page(
        self, resolved: _Resolved, end: int, max_messages: int
    ) -> tuple[PageCut, list[StorageRecord]]:
        source = resolved.source
        if isinstance(source, EventLog):
            return source.page(end, max_messages)
        try:
            return await source.page(end, max_messages)
        except SessionNotFound:  # deleted since it was resolved
            raise UnknownSession(resolved.session_id) from None

    # -- session.search ------------------------------------------------------------------------

    async def search(self, request: SearchParams) -> SearchResult:
        resolved = await self._resolve(request.address)
        from .search import search  # RE2 is loaded by the first search, not at start-up

        return await search(resolved.session_id, resolved.source, request)

    # -- session.follow ------------------------------------------------------------------------

    async def follow(self, request: FollowParams) -> Then:
        resolved = await self._resolve(request.address)
        # Subscribe before reading the snapshot: nothing appended in between can be missed.
        send, receive = anyio.create_memory_object_stream[SessionEvent](FOLLOW_BUFFER)
        subscription = _Subscription(
            uuid.uuid4().hex, resolved.session_id, send, receive, next_seq=0
        )
        self._subscriptions[subscription.id] = subscription
        self._by_session.setdefault(resolved.session_id, {})[subscription.id] = subscription
        try:
            source = resolved.source
            cursor = source.last_seq
            subscription.next_seq = cursor + 1
            subscription.last_sent = cursor
            cut, records = await self._page(resolved, cursor + 1, request.max_messages)
            # A deletion that ran while this resolved the session found no subscription to end.
            if subscription.end_reason is not None or not await self._exists(resolved.session_id):
                raise UnknownSession(resolved.session_id)
        except BaseException:
            self._forget(subscription)
            raise
        result = FollowResult(
            subscription.id, resolved.header, cursor, to_history_records(records), cut.has_more
        )
        return Then(result, lambda: self._start_delivery(subscription))

    async def unfollow(self, request: UnfollowParams) -> Empty:
        subscription = self._subscriptions.get(request.subscription_id)
        if subscription is None:
            raise InvalidParams.at(
                "$.subscriptionId", f"no subscription {echoed(request.subscription_id)}"
            )
        self._end(subscription, "unfollowed")
        return Empty()

    def _publish(self, session_id: str, event: SessionEvent) -> None:
        """Called for every event a live session appends (synchronously, in seq order)."""
        subscriptions = self._by_session.get(session_id)
        if not subscriptions:
            return
        for subscription in list(subscriptions.values()):
            if event.seq < subscription.next_seq or subscription.end_reason is not None:
                continue  # already in the snapshot
            if event.seq > subscription.next_seq:
                # Appended unannounced: recovery closes an interrupted turn before the session
                # is registered live, so a follower that subscribed while it was cold never saw
                # those events. Send them from the log first: no gap.
                for missed in self._logged(session_id, subscription.next_seq, event.seq):
                    self._offer(subscription, missed)
            self._offer(subscription, event)

    def _deleted(self, session_id: str) -> None:
        for subscription in list(self._by_session.get(session_id, {}).values()):
            self._end(subscription, "deleted")

    def _rewound(self, session_id: str, kept: int) -> None:
        for subscription in list(self._by_session.get(session_id, {}).values()):
            if subscription.next_seq > kept:  # it took events that are gone
                subscription.stored_until = kept
                subscription.backlog = [e for e in subscription.backlog if e.seq < kept]
                self._end(subscription, "rewound")

    async def _exists(self, session_id: str) -> bool:
        if session_id in self.sessions.live:
            return True
        return await self.sessions.store.exists(session_id)

    def _logged(self, session_id: str, lo: int, hi: int) -> list[SessionEvent]:
        live = self.sessions.live.get(session_id)
        return live.log.events(lo, hi) if live is not None else []

    def _offer(self, subscription: _Subscription, event: SessionEvent) -> None:
        """Queue the next event for one subscriber (ending it if its buffer is full)."""
        if subscription.end_reason is not None:
            return
        subscription.next_seq = event.seq + 1
        if not subscription.delivering:
            subscription.backlog.append(event)  # the result is not out yet
            return
        try:
            subscription.send.send_nowait(event)
        except anyio.WouldBlock:
            self._end(subscription, "overflow")

    def _start_delivery(self, subscription: _Subscription) -> None:
        if subscription.end_reason in ("deleted", "rewound"):  # between the result and now
            self.connection.start_soon(self._deliver_backlog, subscription)
            return
        if subscription.id not in self._subscriptions:
            return
        subscription.delivering = True
        backlog, subscription.backlog = subscription.backlog, []
        for event in backlog:
            try:
                subscription.send.send_nowait(event)
            except anyio.WouldBlock:
                self._end(subscription, "overflow")
                break
        self.connection.start_soon(self._deliver, subscription)
        self.connection.start_soon(self._poll, subscription)

    async def _poll(self, subscription: _Subscription) -> None:
        """Take the events another process appends to the session from the store, until the
        subscription ends. While the session is live here its events come from `_publish`."""
        watch = self.sessions.store.watch(subscription.session_id)
        try:
            await self._catch_up(subscription, watch)
        finally:
            watch.close()

    async def _catch_up(self, subscription: _Subscription, watch: Watch) -> None:
        session_id, store = subscription.session_id, self.sessions.store
        source: HistorySource | None = None
        unreadable = False
        while True:
            await watch.wait(FOLLOW_POLL_S)
            if subscription.end_reason is not None:
                return
            if session_id in self.sessions.live:
                continue
            try:
                if source is None:
                    source = await store.history(session_id)
                else:
                    await source.refresh()
                lo = subscription.next_seq
                if source.last_seq < lo:
                    if not await store.exists(session_id):
                        raise SessionNotFound(session_id)
                    continue
                records = await source.records(lo, source.last_seq + 1)
            except SessionNotFound:
                self._end(subscription, "deleted")
                return
            except OSError as exc:
                # The store cannot be read for now (a database failing over or restarting):
                # the next wake-up or safety poll reads again from the same seq.
                if not unreadable:
                    log.warning("following %s: the store cannot be read: %s", session_id, exc)
                unreadable = True
                continue
            if unreadable:
                log.info("following %s: the store can be read again", session_id)
                unreadable = False
            for record in records:
                for event in decode_storage_record(record):
                    # Whatever `_publish` offered meanwhile is not offered twice.
                    if event.seq == subscription.next_seq:
                        self._offer(subscription, event)

    async def _deliver(self, subscription: _Subscription) -> None:
        async with subscription.receive:
            async for event in subscription.receive:
                if subscription.end_reason in ("unfollowed", "closed", "rewound"):
                    break  # nobody wants the rest, or it was never stored
                await self.connection.notify(
                    "session.event", SessionEventParams(subscription.id, event)
                )
                subscription.last_sent = event.seq
        if subscription.end_reason in ("overflow", "deleted", "rewound"):
            await self._say_ended(subscription)

    async def _deliver_backlog(self, subscription: _Subscription) -> None:
        """What a subscription ended before its delivery began had taken, then `followEnded`."""
        backlog, subscription.backlog = subscription.backlog, []
        for event in backlog:
            if self.connection.closed:
                return
            await self.connection.notify(
                "session.event", SessionEventParams(subscription.id, event)
            )
            subscription.last_sent = event.seq
        await self._say_ended(subscription)

    async def _say_ended(self, subscription: _Subscription) -> None:
        assert subscription.end_reason is not None
        last_seq = subscription.last_sent
        if subscription.stored_until is not None:
            last_seq = min(last_seq, subscription.stored_until - 1)
        if not self.connection.closed:
            await self.connection.notify(
                "session.followEnded",
                FollowEndedParams(subscription.id, subscription.end_reason, last_seq),
            )

    def _end(self, subscription: _Subscription, reason: FollowEndReason) -> None:
        """Stop taking events. After an overflow or a deletion what is buffered is still
        delivered, then `followEnded` with the last seq sent; after a rewind only
        `followEnded`; after an unfollow or a closed connection, nothing."""
        if subscription.end_reason is None:
            subscription.end_reason = reason
        self._forget(subscription)
        subscription.send.close()
        if not subscription.delivering:
            subscription.receive.close()

    def _forget(self, subscription: _Subscription) -> None:
        self._subscriptions.pop(subscription.id, None)
        by_session = self._by_session.get(subscription.session_id)
        if by_session is not None:
            by_session.pop(subscription.id, None)
            if not by_session:
                del self._by_session[subscription.session_id]

    def _close_all(self) -> None:
        for subscription in list(self._subscriptions.values()):
            self._end(subscription, "closed")
        # The registry outlives this connection when the process serves several.
        self.sessions.event_listeners.remove(self._publish)
        self.sessions.deletion_listeners.remove(self._deleted)
        self.sessions.rewind_listeners.remove(self._rewound)

    # -- addresses -----------------------------------------------------------------------------

    async def _resolve(self, address: Any) -> _Resolved:
        if isinstance(address, SessionAddressed):
            session_id = _checked_id(address.session_id, "$.address.sessionId")
            resolved = await self._open(session_id)
            if resolved.header.origin == "subagent":
                raise _address_error(
                    "origin",
                    f"session {session_id} is a subagent's child: address it as "
                    '{"kind": "subagent", "parentSessionId", "childSessionId"}',
                )
            return resolved
        parent_id = _checked_id(address.parent_session_id, "$.address.parentSessionId")
        child_id = _checked_id(address.child_session_id, "$.address.childSessionId")
        child = await self._open(child_id)
        if child.header.origin != "subagent":
            raise _address_error(
                "origin", f'session {child_id}\'s header does not say origin "subagent"'
            )
        if child.header.parent_session != parent_id:
            raise _address_error(
                "parentSession",
                f"session {child_id}'s header names another parent session, not {parent_id}",
            )
        parent = await self._open(parent_id)
        if not await self._started(parent, child_id):
            raise _address_error(
                "subagentStart", f"session {parent_id}'s log holds no subagent/start for {child_id}"
            )
        return child

    async def _started(self, parent: _Resolved, child_id: str) -> bool:
        source = parent.source
        if not isinstance(source, EventLog):
            return await source.has_child(child_id)
        return any(
            type(e) is SubagentStart and e.data.child_session_id == child_id
            for e in source.plain_events()
        )

    async def _open(self, session_id: str) -> _Resolved:
        live = self.sessions.live.get(session_id)
        if live is not None and not live.log.base:
            return _Resolved(session_id, live.header, live.log)
        try:
            source = await self.sessions.store.history(session_id)
        except SessionNotFound:
            raise UnknownSession(session_id) from None
        if live is not None:  # loaded for a tail: what it does not hold is the store's
            held = HeldHistory(live.header, lambda: live.log, source)
            return _Resolved(session_id, live.header, held)
        return _Resolved(session_id, source.header, source)


def _checked_id(session_id: str, where: str) -> str:
    try:
        return validate_session_id(session_id)
    except InvalidSessionId as exc:
        raise InvalidParams.at(where, str(exc)) from None


def _address_error(check: str, problem: str) -> InvalidParams:
    return InvalidParams(
        f"Invalid params: address: {problem}", {"path": "$.address", "check": check}
    )
