"""A connection's list subscriptions (`acp_server.server.session_list`) listen to the session
registry only while the connection lives: closing it takes every listener away, once."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from acp_server.server.rpc import Connection
from acp_server.server.session_list import SessionList
from acp_server.server.sessions import SessionRegistry
from acp_server.storage.jsonl.store import JsonlStore


class _Sink:
    async def send(self, frame: bytes) -> None:
        raise AssertionError("nothing is sent")

    def send_nowait(self, frame: bytes) -> None:
        raise AssertionError("nothing is sent")


def listener_counts(sessions: SessionRegistry) -> tuple[int, int, int]:
    return (
        len(sessions.event_listeners),
        len(sessions.deletion_listeners),
        len(sessions.change_listeners),
    )


def test_closing_the_connection_removes_each_registry_listener_it_added(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sessions = SessionRegistry(JsonlStore(tmp_path))
    before = listener_counts(sessions)
    connection = Connection(_Sink())
    SessionList(connection, sessions).install()
    assert listener_counts(sessions) == (before[0] + 1, before[1] + 1, before[2] + 1)

    with caplog.at_level(logging.ERROR):
        connection.close()

    assert listener_counts(sessions) == before
    assert caplog.records == []


def test_two_connections_each_remove_only_their_own_listeners(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sessions = SessionRegistry(JsonlStore(tmp_path))
    before = listener_counts(sessions)
    first, second = Connection(_Sink()), Connection(_Sink())
    SessionList(first, sessions).install()
    SessionList(second, sessions).install()

    with caplog.at_level(logging.ERROR):
        first.close()
        assert listener_counts(sessions) == (before[0] + 1, before[1] + 1, before[2] + 1)
        second.close()

    assert listener_counts(sessions) == before
    assert caplog.records == []
