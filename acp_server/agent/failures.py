"""The agent loop's failures that the server reports to the client.

Kept apart from the loop itself, so that the server's error translation can name them without
importing the loop and its tools at start-up.
"""

from __future__ import annotations


class ModelRequestFailed(Exception):
    """The model request of a step failed; the turn ended with `turn/end {kind: "error"}`."""

    def __init__(self, message: str, code: int | str | None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
