"""How a followed session list changed (`list_changes`, SPEC 3.5): created, updated, deleted,
each once, and a session that left the list told as it still is."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from acp_server.server.listing import list_changes


def test_a_new_session_is_created_a_changed_one_updated_a_gone_one_deleted() -> None:
    before = {"a": "a1", "b": "b1", "c": "c1"}
    after = {"d": "d1", "a": "a2", "b": "b1"}
    assert list_changes(before, after, after) == [
        ("created", "d1"),
        ("updated", "a2"),
        ("deleted", "c1"),
    ]


def test_a_session_that_left_the_list_but_exists_is_told_as_it_is_now() -> None:
    before = {"a": "a shown"}
    assert list_changes(before, {}, {"a": "a archived"}) == [("deleted", "a archived")]


def test_nothing_changed_says_nothing() -> None:
    shown = {"a": "a1", "b": "b1"}
    assert list_changes(shown, dict(shown), shown) == []


versions = st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 3))


@given(versions, versions)
def test_the_changes_turn_what_was_shown_into_what_is_shown_telling_each_session_once(
    before: dict[str, int], after: dict[str, int]
) -> None:
    def shown(versions: dict[str, int]) -> dict[str, tuple[str, int]]:
        return {k: (k, v) for k, v in versions.items()}

    result = dict(shown(before))
    changes = list_changes(shown(before), shown(after), shown(after))
    assert len({session_id for _, (session_id, _) in changes}) == len(changes)
    for change, (session_id, version) in changes:
        assert (change == "created") == (session_id not in before and session_id in after)
        if change == "deleted":
            del result[session_id]
        else:
            result[session_id] = (session_id, version)
    assert result == shown(after)
