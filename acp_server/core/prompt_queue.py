"""The prompts waiting in a session whose turn is running (SPEC 4, queued prompts).

Pure bookkeeping, no I/O: a second `session/prompt` while a turn runs is admitted in the order
received, up to `MAX_QUEUED`; the next one to run is the oldest; `session/cancel` withdraws every
prompt of the client that sent it. What a ticket is (how its waiter is woken) is the caller's.
"""

from __future__ import annotations

from collections import deque
from typing import Final, Generic, TypeVar

MAX_QUEUED: Final = 16
"""Prompts a session may hold waiting behind its running turn; one more is refused."""

T = TypeVar("T")


class QueueFull(Exception):
    """The queue already holds `MAX_QUEUED` prompts."""


class PromptQueue(Generic[T]):
    """Waiting prompts in arrival order, each with the client that sent it."""

    def __init__(self, limit: int = MAX_QUEUED) -> None:
        self.limit = limit
        self._waiting: deque[tuple[object, T]] = deque()

    def __len__(self) -> int:
        return len(self._waiting)

    def admit(self, client: object, ticket: T) -> int:
        """Queue `ticket` of `client` last; its place (1 = next). `QueueFull` at the limit."""
        if len(self._waiting) >= self.limit:
            raise QueueFull
        self._waiting.append((client, ticket))
        return len(self._waiting)

    def pop_next(self) -> T | None:
        """The oldest waiting ticket, taken out; None when none waits."""
        return self._waiting.popleft()[1] if self._waiting else None

    def remove(self, ticket: T) -> bool:
        """Take `ticket` out wherever it is (its request was cancelled); whether it was in."""
        for index, (_, waiting) in enumerate(self._waiting):
            if waiting is ticket:
                del self._waiting[index]
                return True
        return False

    def drain(self) -> list[T]:
        """Take out every ticket, in order (the session is closing)."""
        taken = [ticket for _, ticket in self._waiting]
        self._waiting.clear()
        return taken

    def withdraw(self, client: object) -> list[T]:
        """Take out every ticket of `client`, in order (`session/cancel` from it)."""
        taken = [ticket for owner, ticket in self._waiting if owner is client]
        self._waiting = deque((o, t) for o, t in self._waiting if o is not client)
        return taken
