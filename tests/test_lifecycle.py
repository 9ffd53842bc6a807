"""A session's title and archive state, folded from its events, and what `session/set_title`,
`session/archive` and `session/unarchive` append (pure); `session/list`'s archive filter."""

from __future__ import annotations

import pytest

from acp_server.core.events import (
    SessionArchived,
    SessionArchivedData,
    SessionEvent,
    SessionTitle,
    SessionTitleData,
    TurnStart,
    TurnStartData,
)
from acp_server.core.lifecycle import (
    TitleError,
    archive_change,
    current_title,
    is_archived,
    normalized_title,
    title_change,
)
from acp_server.server.errors import InvalidParams
from acp_server.server.listing import archive_filter
from acp_server.storage.api import archive_keeps

EVENTS: list[SessionEvent] = [
    SessionTitle(0, 1, SessionTitleData("first")),
    SessionArchived(1, 2, SessionArchivedData(True)),
    TurnStart(2, 3, TurnStartData(0)),
    SessionTitle(3, 4, SessionTitleData("second")),
    SessionArchived(4, 5, SessionArchivedData(False)),
]


def test_a_title_is_stored_without_its_surrounding_whitespace() -> None:
    assert normalized_title("  Fix the parser \n") == "Fix the parser"


@pytest.mark.parametrize("title", ["", "   ", "\n\t"])
def test_an_empty_title_is_refused(title: str) -> None:
    with pytest.raises(TitleError, match="cannot be empty"):
        normalized_title(title)


def test_the_title_is_that_of_the_last_title_event() -> None:
    assert (current_title(EVENTS), current_title(EVENTS[:3]), current_title([])) == (
        "second",
        "first",
        None,
    )


def test_the_archive_state_is_that_of_the_last_archive_event() -> None:
    assert (is_archived(EVENTS), is_archived(EVENTS[:4]), is_archived([])) == (False, True, False)


def test_a_new_title_appends_a_title_event() -> None:
    assert title_change(EVENTS, "third") == SessionTitleData("third")


def test_the_title_a_session_has_appends_nothing() -> None:
    assert title_change(EVENTS, "second") is None


def test_archiving_appends_an_archived_event_and_unarchiving_its_opposite() -> None:
    assert (archive_change(EVENTS, True), archive_change(EVENTS[:4], False)) == (
        SessionArchivedData(True),
        SessionArchivedData(False),
    )


def test_archiving_an_archived_session_or_unarchiving_an_unarchived_one_appends_nothing() -> None:
    assert (archive_change(EVENTS[:4], True), archive_change(EVENTS, False)) == (None, None)


def test_the_archive_filter_is_exclude_when_absent() -> None:
    assert [archive_filter(v) for v in (None, "exclude", "include", "only")] == [
        "exclude",
        "exclude",
        "include",
        "only",
    ]


def test_an_unsupported_archive_filter_is_invalid_params_naming_archived() -> None:
    with pytest.raises(InvalidParams) as raised:
        archive_filter("_custom")
    assert (str(raised.value), raised.value.data) == (
        "Invalid params: unsupported archive filter '_custom'; it is one of: exclude, include, "
        "only - at `$.archived`",
        {"path": "$.archived"},
    )


def test_each_filter_keeps_the_sessions_it_names() -> None:
    kept = {
        wanted: [archive_keeps(wanted, archived) for archived in (False, True)]
        for wanted in ("exclude", "include", "only")
    }
    assert kept == {"exclude": [True, False], "include": [True, True], "only": [False, True]}
