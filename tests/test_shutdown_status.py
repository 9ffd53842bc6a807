"""The exit status a server's shutdown gives (`acp_server.server.lifetime`): 0 once it completed,
128 + the signal only when a signal's shutdown could not finish; what could not be finished is
noted by the session registry."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any, cast

import pytest

from acp_server.server.lifetime import exit_status, sessions_served
from acp_server.storage.jsonl.store import JsonlStore


def test_the_end_of_input_exits_0() -> None:
    assert exit_status(None, []) == 0


def test_a_signal_whose_shutdown_completed_exits_0() -> None:
    assert (exit_status(signal.SIGTERM, []), exit_status(signal.SIGINT, [])) == (0, 0)


def test_a_signal_whose_shutdown_left_work_unfinished_exits_128_plus_the_signal() -> None:
    unfinished = ["session s1: its log failed to write"]
    assert (exit_status(signal.SIGTERM, unfinished), exit_status(signal.SIGINT, unfinished)) == (
        143,
        130,
    )


class _StoreThatWillNotClose(JsonlStore):
    async def aclose(self) -> None:
        raise OSError("the disk went away")


@pytest.mark.anyio
async def test_a_store_that_will_not_close_is_noted_unfinished(tmp_path: Path) -> None:
    store = _StoreThatWillNotClose(tmp_path)
    await store.prepare()
    async with sessions_served(store, cast(Any, object())) as sessions:
        pass
    assert sessions.unfinished == ["the store: could not close: OSError"]
