"""A session's title and archive state, folded from its events (`session/set_title`,
`session/archive`, `session/unarchive`), and what each of those methods appends: pure.

Both are events in the log (`session/title`, `session/archived`), so a page or a follow shows
every change in its place; a change to the state a session already has appends nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from .events import (
    SessionArchived,
    SessionArchivedData,
    SessionEvent,
    SessionTitle,
    SessionTitleData,
)


class TitleError(ValueError):
    """A title that cannot be stored (the message says why)."""


def normalized_title(title: str) -> str:
    """The title as stored: without leading and trailing whitespace; an empty one is refused."""
    stored = title.strip()
    if not stored:
        raise TitleError("a title cannot be empty (or only whitespace)")
    return stored


def current_title(events: Iterable[SessionEvent]) -> str | None:
    """The session's title: that of its last `session/title` event (None: it has none)."""
    title = None
    for event in events:
        if type(event) is SessionTitle:
            title = event.data.title
    return title


def is_archived(events: Iterable[SessionEvent]) -> bool:
    """Whether the session's last `session/archived` event archived it."""
    archived = False
    for event in events:
        if type(event) is SessionArchived:
            archived = event.data.archived
    return archived


def title_change(events: Iterable[SessionEvent], title: str) -> SessionTitleData | None:
    """What setting `title` (already normalized) appends: None when it is the title already."""
    return None if current_title(events) == title else SessionTitleData(title)


def archive_change(events: Iterable[SessionEvent], archived: bool) -> SessionArchivedData | None:
    """What archiving (True) or unarchiving (False) appends: None when the session is so
    already (archiving an archived session succeeds, and changes nothing)."""
    return None if is_archived(events) == archived else SessionArchivedData(archived)
