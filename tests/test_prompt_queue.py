"""The queue of prompts waiting behind a session's running turn (SPEC 4), as pure logic."""

from __future__ import annotations

import pytest

from acp_server.core.prompt_queue import MAX_QUEUED, PromptQueue, QueueFull

A, B = object(), object()


def test_the_oldest_waiting_prompt_runs_next() -> None:
    queue: PromptQueue[str] = PromptQueue()
    queue.admit(A, "first")
    queue.admit(B, "second")
    assert [queue.pop_next(), queue.pop_next(), queue.pop_next()] == ["first", "second", None]


def test_admit_says_how_many_prompts_wait_including_the_new_one() -> None:
    queue: PromptQueue[str] = PromptQueue()
    assert [queue.admit(A, "first"), queue.admit(B, "second")] == [1, 2]


def test_a_prompt_beyond_the_limit_is_refused() -> None:
    queue: PromptQueue[int] = PromptQueue()
    for n in range(MAX_QUEUED):
        queue.admit(A, n)
    with pytest.raises(QueueFull):
        queue.admit(B, MAX_QUEUED)
    assert (MAX_QUEUED, len(queue)) == (16, 16)


def test_withdraw_takes_every_prompt_of_that_client_and_keeps_the_others_in_order() -> None:
    queue: PromptQueue[str] = PromptQueue()
    queue.admit(A, "a1")
    queue.admit(B, "b1")
    queue.admit(A, "a2")
    queue.admit(B, "b2")
    assert queue.withdraw(A) == ["a1", "a2"]
    assert [queue.pop_next(), queue.pop_next(), queue.pop_next()] == ["b1", "b2", None]


def test_remove_takes_one_prompt_out_wherever_it_waits() -> None:
    queue: PromptQueue[str] = PromptQueue()
    queue.admit(A, "first")
    queue.admit(A, "second")
    assert (queue.remove("second"), queue.remove("second")) == (True, False)
    assert [queue.pop_next(), queue.pop_next()] == ["first", None]


def test_drain_takes_every_prompt_out_in_order() -> None:
    queue: PromptQueue[str] = PromptQueue()
    queue.admit(A, "a1")
    queue.admit(B, "b1")
    assert (queue.drain(), len(queue)) == (["a1", "b1"], 0)
