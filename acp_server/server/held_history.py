"""The history (SPEC 3.1) of a live session loaded for a tail (`core.tail`): what it holds from
its base is read from memory, what comes before from the store.

Everything before the base is stored and never changes (the session's writer is this process,
and it appends only after the base), so a page that reaches past the base takes its older
messages from the store's page that ends at the base.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable

from ..core.chunk_rows import StorageRecord, pack_chunk_runs
from ..core.event_log import EventLog
from ..core.events import SubagentStart
from ..core.header import SessionHeader
from ..core.paging import PageCut, page_cut
from ..storage.api import HistorySource


class HeldHistory:
    """The store API's `HistorySource` of a live session whose log is held from a base."""

    def __init__(
        self, header: SessionHeader, log: Callable[[], EventLog], stored: HistorySource
    ) -> None:
        self.header = header
        self._log = log
        """The session's log as it is now (a load without a tail may make it whole)."""
        self.stored = stored

    @property
    def last_seq(self) -> int:
        return self._log().last_seq

    async def refresh(self) -> None:
        pass  # appended in this process: the log is always current

    async def page(self, end: int, max_messages: int) -> tuple[PageCut, list[StorageRecord]]:
        log = self._log()
        base = log.base
        if end <= base:
            return await self.stored.page(end, max_messages)
        newest = bisect_left(log.message_seqs, end)
        if newest >= max_messages or not base:
            cut = page_cut(log.message_seqs, log.message_cuts, end, max_messages)
            return cut, log.records_between(cut.start, end)
        # The held messages are fewer than the page's: the older ones are the store's.
        cut, earlier = await self.stored.page(base, max_messages - newest)
        return PageCut(cut.start, end), pack_chunk_runs([*earlier, *log.records_between(base, end)])

    async def records(self, lo: int, hi: int) -> list[StorageRecord]:
        log = self._log()
        base = log.base
        earlier = await self.stored.records(lo, min(hi, base)) if lo < base else []
        return pack_chunk_runs([*earlier, *log.records_between(max(lo, base), hi)])

    async def has_child(self, child_id: str) -> bool:
        held = any(
            type(e) is SubagentStart and e.data.child_session_id == child_id
            for e in self._log().plain_events(prefix=False)
        )
        return held or await self.stored.has_child(child_id)
