"""Waiting in tests for something another process does: poll a condition, give up after a while."""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio

INTERVAL = 0.02

TIMEOUT = 60.0
"""Seconds a test waits for a frame, a file or a process before it fails. Generous: it only
ends a wait that a failing test would never finish, and a loaded CI machine is slow."""


def poll(condition: Callable[[], bool], timeout: float) -> bool:
    """Whether `condition()` holds within about `timeout` seconds (checked every 20 ms)."""
    for _ in range(max(1, round(timeout / INTERVAL))):
        if condition():
            return True
        time.sleep(INTERVAL)
    return condition()


def wait_until(condition: Callable[[], bool], what: str, timeout: float = TIMEOUT) -> None:
    """Return once `condition()` holds; fail the test, saying `what` never happened, otherwise."""
    if not poll(condition, timeout):
        raise AssertionError(f"timed out waiting until {what}")


async def wait_for(condition: Callable[[], bool], interval: float = INTERVAL) -> None:
    """Return once `condition()` holds, checking every `interval` seconds; the caller's cancel
    scope bounds the wait.

    For what only shows in the file system (a file another process or a provider writes),
    which no `anyio.Event` can signal.
    """
    while not condition():  # noqa: ASYNC110 - a file appearing cannot be awaited as an event
        await anyio.sleep(interval)
