"""Held batches: a database writer keeps what it wrote until a synchronous commit makes it
durable, and after a reconnect writes again exactly what the store lacks; its reconnects back
off within the retry window."""

from __future__ import annotations

import pytest
from strategies import streamed_turn

from acp_server.core.held_batches import (
    FIRST_DELAY_S,
    MAX_DELAY_S,
    HeldBatches,
    StoreAhead,
    StoreLost,
    retry_delay,
)

TURN = streamed_turn(0, 5, 6)
"""Events of seqs 5 to 18."""


def held_from_5(*cuts: int) -> HeldBatches:
    """Batches of `TURN` written one after another, cut before each index in `cuts`."""
    held = HeldBatches(5)
    start = 0
    for cut in [*cuts, len(TURN)]:
        held.hold(TURN[start:cut])
        start = cut
    return held


def test_what_the_store_lacks_is_every_held_event_from_its_next_seq() -> None:
    held = held_from_5(4, 9)
    assert held.lacking(5 + 9) == TURN[9:]


def test_a_store_that_committed_part_of_a_batch_gets_the_rest_of_it() -> None:
    held = held_from_5(4, 9)
    assert held.lacking(5 + 6) == TURN[6:]


def test_a_store_that_has_everything_lacks_nothing() -> None:
    held = held_from_5(4)
    assert held.lacking(5 + len(TURN)) == []


def test_a_store_that_lost_every_asynchronous_commit_gets_them_all_again() -> None:
    held = held_from_5(4, 9)
    assert held.lacking(5) == TURN


def test_a_durable_commit_lets_go_of_what_is_held() -> None:
    held = held_from_5(4)
    held.durable()
    held.hold(TURN[:0])
    assert (len(held), held.start, held.end, held.lacking(held.end)) == (0, 19, 19, [])


def test_what_follows_a_durable_commit_is_held_from_there() -> None:
    held = HeldBatches(5)
    held.hold(TURN[:4])
    held.durable()
    held.hold(TURN[4:])
    assert (held.start, held.lacking(9)) == (9, TURN[4:])


def test_a_store_past_what_was_written_means_another_writer() -> None:
    held = held_from_5(4)
    with pytest.raises(StoreAhead) as ahead:
        held.lacking(20)
    assert str(ahead.value) == "the store's next seq is 20, past the 19 written here"


def test_a_store_short_of_a_durable_commit_cannot_be_made_whole() -> None:
    held = held_from_5(4)
    held.durable()
    with pytest.raises(StoreLost) as lost:
        held.lacking(12)
    assert str(lost.value) == "the store's next seq is 12, short of the 19 committed durably"


def test_a_batch_that_does_not_follow_the_held_ones_is_refused() -> None:
    held = HeldBatches(5)
    held.hold(TURN[:4])
    with pytest.raises(ValueError, match="a batch from seq 10 does not follow seq 8"):
        held.hold(TURN[5:])
    assert held.end == 9


def test_reconnects_back_off_by_doubling_up_to_the_longest_wait() -> None:
    delays = [retry_delay(attempt, 30.0) for attempt in range(8)]
    assert delays == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0]
    assert (delays[0], delays[-1]) == (FIRST_DELAY_S, MAX_DELAY_S)


def test_the_last_wait_ends_with_the_retry_window() -> None:
    assert retry_delay(6, 0.3) == 0.3


def test_there_is_no_wait_once_the_retry_window_is_over() -> None:
    assert (retry_delay(0, 0.0), retry_delay(3, -1.0)) == (None, None)


def test_a_late_attempt_waits_the_longest_wait() -> None:
    assert retry_delay(10_000, 30.0) == MAX_DELAY_S
