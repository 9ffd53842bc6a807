"""The guard that keeps the fast tier fast (a pytest plugin, loaded by `conftest.py`).

`pytest -m "not process"` is the tier a developer runs between edits, so a test that starts a
process (subprocess, asyncio's and anyio's, multiprocessing, fork, posix_spawn, os.system) or a
server (anything that listens on a socket) must be marked `process`. An unmarked test that does
either fails, in its setup (fixtures included) or its call, naming the marker. Teardowns are
left alone: a module's or the session's fixture, set up by a marked test, is torn down in
whichever test comes last (the PostgreSQL server's `pg_ctl stop`, say).
"""

from __future__ import annotations

import _posixsubprocess
import contextlib
import os
import socket
import subprocess
from collections.abc import Callable, Generator, Iterator
from typing import Any

import pytest

PROCESS_MARK = "process"

_STARTERS: list[tuple[Any, str, str]] = [
    # subprocess (and asyncio's and anyio's, which use it) binds fork_exec at its import
    (subprocess.Popen, "_execute_child", "a subprocess"),
    (_posixsubprocess, "fork_exec", "a subprocess"),  # multiprocessing
    (os, "posix_spawn", "a process (os.posix_spawn)"),
    (os, "posix_spawnp", "a process (os.posix_spawnp)"),
    (os, "fork", "a process (os.fork)"),
    (os, "forkpty", "a process (os.forkpty)"),
    (os, "system", "a process (os.system)"),
    (socket.socket, "listen", "a server (a socket listens)"),
]
"""What only a `process` test may call: the functions every way of starting a process ends in,
and `listen`, which every server (asyncio's, anyio's, http.server's) calls."""


@contextlib.contextmanager
def _processes_refused(item: pytest.Item) -> Iterator[None]:
    """Within: each starter fails the test `item` (unmarked) as it is called. The failure is
    also raised after the phase, for a starter called in a thread or a task that swallowed it."""
    if item.get_closest_marker(PROCESS_MARK) is not None:
        yield
        return
    started: list[str] = []

    def refusing(what: str) -> Callable[..., Any]:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            started.append(what)
            pytest.fail(_unmarked(item, what), pytrace=False)

        return refuse

    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in _STARTERS]
    for owner, name, what in _STARTERS:
        setattr(owner, name, refusing(what))
    try:
        yield
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)
    if started:
        pytest.fail(_unmarked(item, started[0]), pytrace=False)


def _unmarked(item: pytest.Item, what: str) -> str:
    return (
        f"{item.nodeid} starts {what} but is not marked `{PROCESS_MARK}`: mark it "
        f"`@pytest.mark.{PROCESS_MARK}` (or its file `pytestmark = pytest.mark.{PROCESS_MARK}`), "
        f'so that `pytest -m "not {PROCESS_MARK}"` stays the fast tier'
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    with _processes_refused(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    with _processes_refused(item):
        return (yield)
