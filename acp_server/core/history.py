"""The history API's wire types (SPEC 3), and the record wrapping both sides share.

`session.search`'s params and result are here too (SPEC 3.5); its matching is
`history_search`'s.

`session.page` and `session.follow` answer with `SessionHistoryRecord`s: `{event}` for a plain
event, `{chunks}` for a packed row. `to_history_records` wraps storage records for the wire;
`expand_history_records` is the client's strict decoder back to exact events.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Literal, cast

from msgspec import UNSET, Meta, Struct, UnsetType, field

from .chunk_rows import (
    ROW_CLASSES,
    ChunkRow,
    ChunkRowError,
    StorageRecord,
    convert_row,
    expand_row,
    validate_row,
)
from .content import Meta_
from .events import EventError, SessionEvent, convert_event
from .header import SessionHeader
from .structs import Model

DEFAULT_MAX_MESSAGES = 50
DEFAULT_SEARCH_LIMIT = 20
MAX_SEARCH_LIMIT = 200


class _Inbound(Model, forbid_unknown_fields=False):
    """Params: camelCase, unknown fields ignored (clients may be newer than us)."""


class SessionAddressed(_Inbound, tag="session", tag_field="kind"):
    """A session by its id."""

    session_id: str


class SubagentAddressed(_Inbound, tag="subagent", tag_field="kind"):
    """A subagent's child session, through the parent that started it."""

    parent_session_id: str
    child_session_id: str


SessionAddress = SessionAddressed | SubagentAddressed


class PageParams(_Inbound):
    address: SessionAddress
    through_seq: Annotated[int, Meta(ge=-1)] | UnsetType = UNSET
    """Absent: the session's last seq when the request is read (SPEC 3.1)."""
    before_seq: Annotated[int, Meta(ge=0)] | UnsetType = UNSET
    max_messages: Annotated[int, Meta(ge=1)] = DEFAULT_MAX_MESSAGES
    meta: Meta_ = field(default=UNSET, name="_meta")


class EventRecord(Struct, gc=False):
    """A plain event on the wire."""

    event: SessionEvent


class ChunksRecord(Struct, gc=False):
    """A chunk row on the wire: a run of delta events, packed."""

    chunks: ChunkRow


SessionHistoryRecord = EventRecord | ChunksRecord


class PageResult(Model):
    records: list[Any]
    """`SessionHistoryRecord`s (typed loosely: msgspec unions cannot mix the two shapes)."""
    has_more: bool
    through_seq: int | UnsetType = UNSET
    """When the request left `throughSeq` out: the seq the page was cut at, for the next pages
    to pass, so that later appends never shift them."""


class FollowParams(_Inbound):
    address: SessionAddress
    max_messages: Annotated[int, Meta(ge=1)] = DEFAULT_MAX_MESSAGES
    meta: Meta_ = field(default=UNSET, name="_meta")


class FollowResult(Model):
    subscription_id: str
    header: SessionHeader
    cursor: int
    records: list[Any]
    has_more: bool


class UnfollowParams(_Inbound):
    subscription_id: str


class SessionEventParams(Model):
    """`session.event`: one appended event, never packed."""

    subscription_id: str
    event: SessionEvent


FollowEndReason = Literal["overflow", "closed", "unfollowed", "deleted", "rewound"]


class FollowEndedParams(Model):
    """`session.followEnded`: the subscription is over; `lastSeq` is the last event it sent.

    With reason "rewound" the session's log could not be written and dropped what it had not
    stored: `lastSeq` is then the last stored event the subscription sent, and any event it
    sent after that never reached the log (its seqs will be used again).
    """

    subscription_id: str
    reason: FollowEndReason
    last_seq: int


SearchKind = Literal["user_message", "agent_message", "agent_thought", "tool_result"]
"""What a hit's text is (named as the `session/update`s that show it)."""


class SearchHit(Model):
    """One event that matched: its seq, what its matching text is, and the first matching
    line (cut around the match when long)."""

    seq: int
    kind: SearchKind
    snippet: str


class SearchParams(_Inbound):
    address: SessionAddress
    query: Annotated[str, Meta(min_length=1)]
    regex: bool = False
    """False: `query` is text, matched literally, case-insensitively; True: an RE2 pattern."""
    before_seq: Annotated[int, Meta(ge=0)] | UnsetType = UNSET
    """Only events older than this seq: the next page passes the last hit's seq."""
    limit: Annotated[int, Meta(ge=1, le=MAX_SEARCH_LIMIT)] = DEFAULT_SEARCH_LIMIT
    meta: Meta_ = field(default=UNSET, name="_meta")


class SearchResult(Model):
    hits: list[SearchHit]
    """Newest first."""
    has_more: bool
    """Whether an older event matches too."""


def to_history_records(records: Iterable[StorageRecord]) -> list[SessionHistoryRecord]:
    """Storage records as wire records."""
    return [
        ChunksRecord(cast(ChunkRow, r))
        if type(r) in ROW_CLASSES
        else EventRecord(cast(SessionEvent, r))
        for r in records
    ]


# ---------------------------------------------------------------------------------------------
# The client's decoder.


class HistoryProtocolError(ValueError):
    """The server sent history that breaks SPEC 3: a malformed record, a gap, an overlap."""


def expand_history_records(records: list[Any]) -> list[SessionEvent]:
    """The exact events a page's records stand for, rows expanded and checked.

    `records` are parsed JSON values. A record that is neither `{event}` nor `{chunks}`, a
    malformed event or a malformed row is a `HistoryProtocolError`, and nothing is returned.
    """
    events: list[SessionEvent] = []
    for index, value in enumerate(records):
        events.extend(expand_history_record(value, index))
    return events


def expand_history_record(value: Any, index: int = 0) -> list[SessionEvent]:
    """The exact events one record stands for: `[event]`, or a row's members.

    `index` is the record's position, named in the `HistoryProtocolError` it may raise.
    """
    if not isinstance(value, dict) or len(value) != 1 or not ({"event", "chunks"} >= value.keys()):
        raise HistoryProtocolError(f"records[{index}]: not {{event}} or {{chunks}}")
    try:
        if "event" in value:
            return [convert_event(value["event"])]
        row = convert_row(value["chunks"])
        validate_row(row)
        return list(expand_row(row))
    except (EventError, ChunkRowError) as exc:
        raise HistoryProtocolError(f"records[{index}]: {exc}") from None
