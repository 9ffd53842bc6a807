"""The server under a scenario: one process, JSON-RPC frames in and out through the package's
peer, each failure a `ScenarioError`; and `encode_line`, how the transcript writes a JSON value.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from typing import Any, NamedTuple

from ..client.process import ServerProcess
from ..jsonrpc.peer import Event, Peer
from .scenario import ScenarioError


def encode_line(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class Incoming(NamedTuple):
    frame: dict[str, Any]
    """The message as a JSON object, as the transcript keeps it."""
    event: Event | None
    """What the peer made of it."""


class ScenarioProcess(ServerProcess):
    """The server under a scenario: JSON-RPC frames in and out through the package's peer
    (its ids, its answers), every failure a `ScenarioError`."""

    def __init__(self, argv: Sequence[str]) -> None:
        super().__init__(argv)
        self.peer = Peer(first_id=1)

    def send(self, frame: bytes) -> None:
        try:
            self.send_raw(frame + b"\n")
        except BrokenPipeError:
            raise ScenarioError(f"the server closed its input; stderr:\n{self.stderr}") from None

    def read(self, timeout: float) -> Incoming | None:
        """The next frame, or None when stdout has ended."""
        try:
            line = self.next_line(timeout)
        except TimeoutError:
            raise ScenarioError(
                f"no frame from the server within {timeout}s; stderr:\n{self.stderr}"
            ) from None
        if line is None:
            return None
        try:
            frame = json.loads(line)
        except ValueError:
            raise ScenarioError(
                f"the server wrote a line that is not JSON: {line[:200]!r}"
            ) from None
        if not isinstance(frame, dict):
            raise ScenarioError(
                f"the server wrote a JSON value that is not an object: {line[:200]!r}"
            )
        return Incoming(frame, self.peer.receive(line))

    def wait(self, timeout: float) -> int:
        try:
            return super().wait(timeout)
        except subprocess.TimeoutExpired:
            raise ScenarioError(
                f"the server did not exit within {timeout}s of its input ending"
            ) from None
