"""`session.search` (SPEC 3.5): a session's messages, thoughts and tool results searched for a
text or an RE2 pattern, newest first, paged by seq, within a time bound.

The matching is `core.history_search.SessionSearch`, run in a worker thread. The session is
read a batch of `SEARCH_BATCH` seqs at a time from its newest end: from its in-memory
`EventLog` when it is live here, else from the store's `HistorySource`, so a long stored
session is never read whole for a search whose hits are recent. A search that has not
finished `SEARCH_SECONDS` after it began stops at its next checkpoint and is refused with
-32602 naming `query`.

`SEARCH_SECONDS` is 5, or the value of the environment variable `ACP_SERVER_SEARCH_SECONDS` (a
non-negative number), read once when this module is imported: tests set it to 0 to see the
refusal without a slow query; an invalid value is ignored with a warning.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import Final, cast

import anyio.from_thread
import anyio.to_thread
from msgspec import UnsetType

from ..core.chunk_rows import ROW_CLASSES
from ..core.event_log import EventLog
from ..core.events import SessionEvent
from ..core.history import SearchParams, SearchResult
from ..core.history_search import SessionSearch
from ..core.line_regex import LineRegex, PatternError
from ..core.paging import clip_records
from ..storage.api import HistorySource
from ..storage.errors import SessionNotFound
from .errors import InvalidParams, UnknownSession
from .tunables import env_seconds

log = logging.getLogger(__name__)

SEARCH_SECONDS_ENV: Final = "ACP_SERVER_SEARCH_SECONDS"
DEFAULT_SEARCH_SECONDS: Final = 5.0

SEARCH_BATCH: Final = 8192
"""Seqs read (and searched in one worker-thread call) at a time: mostly streamed chunks, kept
packed in rows, which are not searched."""


SEARCH_SECONDS: Final = env_seconds(SEARCH_SECONDS_ENV, DEFAULT_SEARCH_SECONDS)
"""How long one `session.search` may take."""


class _Overdue(Exception):
    """The search's time bound passed."""


def compile_query(request: SearchParams) -> LineRegex:
    """The request's pattern: its `query` as RE2, or as literal text matched ignoring case;
    -32602 naming `query` for a pattern RE2 refuses."""
    pattern = request.query if request.regex else re.escape(request.query)
    try:
        return LineRegex(pattern, ignore_case=not request.regex)
    except PatternError as exc:
        raise InvalidParams.at("$.query", str(exc)) from None


async def search(
    session_id: str,
    source: EventLog | HistorySource,
    request: SearchParams,
    seconds: float = SEARCH_SECONDS,
) -> SearchResult:
    """Search one session (live, or stored) as `request` asks, within `seconds`."""
    state = SessionSearch(compile_query(request), request.limit)
    deadline = time.monotonic() + seconds

    def checkpoint() -> None:
        if time.monotonic() >= deadline:
            raise _Overdue
        anyio.from_thread.check_cancelled()

    hi = source.last_seq + 1
    if not isinstance(request.before_seq, UnsetType):
        hi = min(hi, request.before_seq)
    try:
        while hi > 0 and not state.done:
            if time.monotonic() >= deadline:
                raise _Overdue
            lo = max(0, hi - SEARCH_BATCH)
            events = await _events(session_id, source, lo, hi)
            await anyio.to_thread.run_sync(_feed, state, events, checkpoint)
            hi = lo
    except _Overdue:
        raise InvalidParams.at(
            "$.query",
            f"the search could not finish within {seconds:g} s; "
            "a more specific query, or an earlier beforeSeq, searches less",
        ) from None
    return SearchResult(state.hits, state.has_more)


def _feed(state: SessionSearch, events: list[SessionEvent], checkpoint: Callable[[], None]) -> None:
    checkpoint()  # a bound already passed stops before any work
    state.feed(events, checkpoint)


async def _events(
    session_id: str, source: EventLog | HistorySource, lo: int, hi: int
) -> list[SessionEvent]:
    """The plain events of seqs `[lo, hi)`, taken on the event loop (a live log changes
    there). Chunk rows are left packed and out: a streamed piece's text is its message's."""
    if isinstance(source, EventLog):
        records = clip_records(source.records, source.starts, lo, hi)
    else:
        try:
            records = await source.records(lo, hi)
        except SessionNotFound:  # deleted since it was resolved
            raise UnknownSession(session_id) from None
    return [cast(SessionEvent, r) for r in records if type(r) not in ROW_CLASSES]
