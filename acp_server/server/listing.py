"""`session/list`'s pure paging (SPEC 3.5): the order of sessions, the opaque cursors, the cwd
filter, and what one listed session shows (`SessionInfo`); and how a followed list changed
(`list_changes`, for `session.list.follow`).

Nothing here touches a store: `SessionRegistry.list` hands in the page the store read
(`Store.list_page`), and the live list what the store listed.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Final, Literal, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

from ..core.header import SessionHeader
from ..storage.api import ArchiveFilter, ListedSession, ListPosition
from .errors import InvalidParams, echoed
from .protocol import SessionInfo

LIST_PAGE_SIZE: Final = 100
"""Sessions per `session/list` page."""

ARCHIVE_FILTERS: Final[tuple[ArchiveFilter, ...]] = ("exclude", "include", "only")


def archive_filter(value: str | None) -> ArchiveFilter:
    """The request's filter (absent or null: `exclude`); -32602 for any other value, as the
    schema asks of a value the agent does not support."""
    if value is None:
        return "exclude"
    for known in ARCHIVE_FILTERS:
        if value == known:
            return known
    raise InvalidParams.at(
        "$.archived",
        f"unsupported archive filter {echoed(value)}; it is one of: exclude, include, only",
    )


class ListEntry(msgspec.Struct, frozen=True):
    """What `session/list` needs of one session before reading its events."""

    session_id: str
    created_at: int
    cwd: str
    additional_directories: list[str] | UnsetType = UNSET


def encode_cursor(entry: ListEntry) -> str:
    """An opaque cursor: the (createdAt, id) of the last session of a page."""
    return cursor_at((entry.created_at, entry.session_id))


def cursor_at(position: ListPosition) -> str:
    """The opaque cursor of a place in the list's order (`decode_cursor` reads it back)."""
    raw = msgspec.json.encode(list(position))
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def list_entry(header: SessionHeader) -> ListEntry:
    """What `session/list` needs of a session, from its header."""
    return ListEntry(header.id, header.created_at, header.cwd, header.additional_directories)


def decode_cursor(cursor: str) -> tuple[int, str]:
    """The position a cursor names; `InvalidParams` for anything `encode_cursor` did not make."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created_at, session_id = msgspec.json.decode(raw, type=tuple[int, str])
    except (binascii.Error, ValueError, msgspec.DecodeError):
        raise InvalidParams.at("$.cursor", "not a cursor returned by session/list") from None
    return created_at, session_id


def _order_key(entry: ListEntry) -> tuple[int, str]:
    return entry.created_at, entry.session_id


def select_page(
    entries: Sequence[ListEntry], *, cwd: str | None, after: tuple[int, str] | None, page_size: int
) -> tuple[list[ListEntry], bool]:
    """One page of sessions, newest first (by createdAt, then id), and whether more follow.

    The cursor is a position, not an offset: sessions created while a client pages do not
    shift later pages (they sort before the first one), and deleted ones leave no hole.
    """
    wanted = os.path.normpath(cwd) if cwd is not None else None
    chosen = [
        e
        for e in entries
        if (wanted is None or os.path.normpath(e.cwd) == wanted)
        and (after is None or _order_key(e) < after)
    ]
    chosen.sort(key=_order_key, reverse=True)
    return chosen[:page_size], len(chosen) > page_size


def iso_time(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 in UTC (`2025-01-02T03:04:05.678Z`)."""
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def session_info(entry: ListEntry, listed: ListedSession) -> SessionInfo:
    """What `session/list` shows of one session: its title and last activity once summarized."""
    info = SessionInfo(
        session_id=entry.session_id,
        cwd=entry.cwd,
        additional_directories=entry.additional_directories or UNSET,
        archived=listed.archived,  # on every session, once the agent advertises archiving
    )
    if not listed.summarized:
        return info  # still listed: the client can see it and delete it
    if listed.title is not None:
        info.title = listed.title
    last_time = listed.updated_at
    info.updated_at = iso_time(last_time if last_time is not None else entry.created_at)
    return info


ListChange = Literal["created", "updated", "deleted"]
"""What `session.listChanged` says happened to a session of a followed list."""

_Shown = TypeVar("_Shown")


def list_changes(
    before: Mapping[str, _Shown], after: Mapping[str, _Shown], present: Mapping[str, _Shown]
) -> list[tuple[ListChange, _Shown]]:
    """How a followed list went from showing `before` to showing `after` (sessions by id):
    a session new to it is `created`, one shown differently `updated` (in `after`'s order),
    then one no longer shown `deleted`. A session that left the list but still exists (an
    archived one, when the list leaves those out) is told as `present` has it, so the client
    sees why; a session that is gone, as it was last shown."""
    changes: list[tuple[ListChange, _Shown]] = []
    for session_id, now in after.items():
        was = before.get(session_id)
        if was is None:
            changes.append(("created", now))
        elif was != now:
            changes.append(("updated", now))
    for session_id, was in before.items():
        if session_id not in after:
            changes.append(("deleted", present.get(session_id, was)))
    return changes
