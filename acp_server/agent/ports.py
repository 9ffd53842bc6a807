"""What the agent needs from the connection to its client, as a small interface.

The agent loop and the tools talk to the editor only through `ClientPort`, so they can be
tested with an in-memory fake and the JSON-RPC connection stays a thin layer.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

import msgspec


class ClientRequestError(Exception):
    """The client answered one of our requests with a JSON-RPC error."""

    def __init__(self, method: str, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{method}: client error {code}: {message}")
        self.method = method
        self.code = code
        self.message = message
        self.data = data


class RequestTimedOut(Exception):
    """No client was there to answer the request in time (a turn whose clients have all gone:
    the detached permission timeout)."""

    def __init__(self, method: str, seconds: float) -> None:
        super().__init__(f"{method}: no client answered within {seconds:g} seconds")
        self.method = method
        self.seconds = seconds


class ClientCapabilities(msgspec.Struct, frozen=True):
    """The client capabilities the agent acts on (from `initialize`)."""

    read_text_file: bool = False
    write_text_file: bool = False
    terminal: bool = False
    compaction: bool = False
    """`session.compaction`: compactions as `compaction_update` / `compaction_summary_chunk`."""
    notices: bool = False
    """`session.notices`: `notice` updates."""
    plan_operations: bool = False
    """`plan`: plans go out as `plan_update` / `plan_removed` instead of `plan`."""
    subagents: bool = False
    """`subagents`: a `task` call's child is shown as `subagent_update` and `session_message`."""
    elicitation_form: bool = False
    """The client renders `elicitation/create` forms (`elicitation.form`)."""
    shows_state: bool = False
    """ACP v2: the session's state (`state_update`) and whole messages (`user_message`...),
    the kinds v1 has no update for."""


class ClientPort(Protocol):
    @property
    def capabilities(self) -> ClientCapabilities:
        """What the client advertised; the agent only reads it (a plain attribute will do)."""

    async def request(self, method: str, params: Any) -> Any:
        """Send a request to the client and wait for its result (a parsed JSON value).

        Raises `ClientRequestError` for an error response. Cancelling the caller abandons the
        request cleanly (nothing is left waiting for the answer).
        """

    async def notify(self, method: str, params: Any) -> None:
        """Send a notification to the client; notifications keep the order they are sent in."""

    async def notify_all(self, method: str, params: Iterable[Any]) -> None:
        """`notify` for each params, in order, in as few writes as the transport allows."""
