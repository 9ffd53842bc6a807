"""`session.follow` on the client side: one session's journal, kept gapless (SPEC 3.2, 3.3).

A `Follow` starts from the subscription's snapshot and then takes the `session.event` frames in
order. `async for event in follow` yields every event the journal gains after the snapshot, in
seq order, each once, whether it came live or from a repair:

- a live event after a gap (which a correct server never sends) is held back while the gap is
  paged, then applied;
- `session.followEnded` (the server's buffer for us overflowed) is answered by following again
  and paging back from the new snapshot until it joins what the journal holds;
- `session.followEnded` with reason "rewound" (the session's log failed to write and dropped
  what it had not stored) drops the journal's events after its `lastSeq`, then follows again
  the same way: the events that take those seqs are yielded as new ones.

The reader hands frames over without ever waiting (the queue is unbounded on purpose: every
event in it is one the journal will hold anyway, and a page the follower asks for may be
behind it on the wire). All journal changes happen in the iterating task, so a
`HistoryProtocolError` is raised where the events are consumed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Protocol, Self

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from ..core.events import SessionEvent
from ..core.history import HistoryProtocolError
from .errors import INVALID_PARAMS, ConnectionClosed, RpcError
from .journal import Gap, Journal

CLEANUP_TIMEOUT = 5.0
"""How long a failed `start` waits for its `session.unfollow` to be answered."""


class PageResult(Protocol):
    """What `FollowClient.page` returns: the records as sent, and `hasMore`."""

    @property
    def records(self) -> list[Any]: ...

    @property
    def has_more(self) -> bool: ...


class FollowClient(Protocol):
    """What a `Follow` needs of its connection (`AcpClient` is one)."""

    async def request(
        self, method: str, params: Any = None, *, on_result: Callable[[Any], None] | None = None
    ) -> Any: ...

    async def page(
        self,
        address: Mapping[str, str],
        through_seq: int,
        before_seq: int | None = None,
        max_messages: int = ...,
    ) -> PageResult: ...

    def route_follow(
        self, subscription_id: str, send: MemoryObjectSendStream[tuple[str, Any]]
    ) -> None:
        """Send this subscription's frames to `send` from now on."""

    def unroute_follow(self, subscription_id: str | None) -> None:
        """Stop sending this subscription's frames."""


class Follow:
    """A followed session: `journal`, `header`, and its new events by `async for`."""

    journal: Journal
    header: Any
    """The session's header, as the snapshot sent it."""

    def __init__(self, client: FollowClient, address: Mapping[str, str], max_messages: int) -> None:
        self.client = client
        self.address = dict(address)
        self.max_messages = max_messages
        self.subscription_id: str | None = None
        self.overflows: list[int] = []
        """The `lastSeq` of each `session.followEnded` overflow this follow recovered from."""
        self.rewinds: list[int] = []
        """The `lastSeq` of each "rewound" `session.followEnded` this follow recovered from."""
        self.repaired: list[Gap] = []
        """Every gap this follow paged to fill (after an overflow, or in the live stream)."""
        self._send, self._frames = anyio.create_memory_object_stream[tuple[str, Any]](math.inf)
        self._yielded = -1
        self._closed = False

    @classmethod
    async def start(
        cls, client: FollowClient, address: Mapping[str, str], max_messages: int
    ) -> Follow:
        follow = cls(client, address, max_messages)
        try:
            result = await follow._subscribe()
            follow.header = result["header"]
            follow.journal = Journal.from_snapshot(
                result["records"], result["cursor"], result["hasMore"]
            )
        except BaseException:
            with anyio.move_on_after(CLEANUP_TIMEOUT, shield=True):
                await follow.aclose()
            raise
        follow._yielded = follow.journal.last_seq
        return follow

    async def _subscribe(self) -> Any:
        params = {"address": self.address, "maxMessages": self.max_messages}
        return await self.client.request("session.follow", params, on_result=self._route)

    def _route(self, result: Any) -> None:
        """Called by the reader with the result, before the frames that follow it are read."""
        self.subscription_id = result["subscriptionId"]
        self.client.route_follow(result["subscriptionId"], self._send)

    # -- new events ----------------------------------------------------------------------------

    def __aiter__(self) -> Follow:
        return self

    async def __anext__(self) -> SessionEvent:
        """The next event after those already yielded (the first: `cursor + 1`)."""
        while self._yielded >= self.journal.last_seq:
            method, params = await self._next_frame()
            if method == "session.event":
                await self._apply_live(params["event"])
            else:
                await self._ended(params)
        self._yielded += 1
        return self.journal.event_at(self._yielded)

    async def _next_frame(self) -> tuple[str, Any]:
        if not self._closed:
            try:
                frame = await self._frames.receive()
            except anyio.EndOfStream:
                if not self._closed:
                    raise ConnectionClosed("the server's output ended while following") from None
            else:
                if not self._closed:
                    return frame
        raise StopAsyncIteration

    async def _apply_live(self, event: Any) -> None:
        """Apply one live event; after a gap, page the gap first."""
        gap = self.journal.apply_live(event)
        if gap is None:
            return
        await self._repair(gap, [])
        if self.journal.apply_live(event) is not None:
            raise HistoryProtocolError(f"paging through seq {gap.through_seq} left a gap")

    async def _ended(self, params: Any) -> None:
        """The server ended the subscription: after an overflow or a rewind, follow again and
        repair."""
        self.subscription_id = None
        reason, last_seq = params.get("reason"), params.get("lastSeq")
        if reason == "rewound":
            self.rewinds.append(last_seq)
            self.journal.drop_after(last_seq)
            self._yielded = min(self._yielded, self.journal.last_seq)
        elif reason == "overflow":
            self.overflows.append(last_seq)
        else:
            await self.aclose()
            return
        result = await self._subscribe()
        gap = self.journal.fill_gap(result["records"])
        if gap is not None:
            await self._repair(gap, result["records"])

    async def _repair(self, gap: Gap, newer_records: list[Any]) -> None:
        """Page back from `gap.through_seq` until the pages reach the journal's tail, then
        fill the gap with them and `newer_records` (oldest first)."""
        self.repaired.append(gap)
        records = list(newer_records)
        missing: Gap | None = gap
        while missing is not None:
            page = await self.client.page(
                self.address, missing.through_seq, max_messages=self.max_messages
            )
            if not page.records:
                raise HistoryProtocolError(f"an empty page through seq {missing.through_seq}")
            records = page.records + records
            missing = self.journal.fill_gap(records)

    # -- older events --------------------------------------------------------------------------

    async def load_older(self) -> bool:
        """Prepend the next older page to the journal; whether older events remain."""
        await prepend_older_page(self.client, self.address, self.journal, self.max_messages)
        return self.journal.has_older

    # -- ending --------------------------------------------------------------------------------

    async def aclose(self) -> None:
        """End the subscription (`session.unfollow`): iteration stops; the journal stays."""
        if self._closed:
            return
        self._closed = True
        self._send.close()  # wakes an iteration waiting for a frame
        self._frames.close()
        subscription_id, self.subscription_id = self.subscription_id, None
        if subscription_id is None:
            return
        self.client.unroute_follow(subscription_id)
        try:
            await self.client.request("session.unfollow", {"subscriptionId": subscription_id})
        except RpcError as exc:
            if exc.code != INVALID_PARAMS:
                raise  # -32602: it had just ended on its own (an overflow on the wire)
        except ConnectionClosed:
            pass

    unfollow = aclose

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


async def prepend_older_page(
    client: FollowClient, address: Mapping[str, str], journal: Journal, max_messages: int
) -> None:
    """Page the events just before the journal's head (`beforeSeq = first_seq`) and prepend them."""
    page = await client.page(
        address, journal.last_seq, before_seq=journal.first_seq, max_messages=max_messages
    )
    journal.prepend(page.records, page.has_more)


async def walk_older(
    client: FollowClient, address: Mapping[str, str], journal: Journal, max_messages: int
) -> None:
    """Prepend older pages, newest to oldest, until the journal starts at seq 0."""
    while journal.has_older:
        await prepend_older_page(client, address, journal, max_messages)
