"""`acp-server attach --status` and `--stop`: the user's running shared servers.

A server is running when its socket answers; its pid is the one the socket's peer credentials
name (`SO_PEERCRED`), which is also what makes `--stop` sure that the process it signals is
that server. What a server says of itself (store, viewer address) is in `KEY.json` beside its
socket, written by the server once it listens. The files of a server that no longer answers,
and is not being started (its lock is free), are removed on the way. Standard library only.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import sys
import time
from typing import Final, NamedTuple

from .attach_places import connect, server_pid

STOP_TIMEOUT: Final = 60.0
"""Seconds a stopped server has to exit (it closes every session's log on the way)."""
POLL_INTERVAL: Final = 0.01


class Running(NamedTuple):
    """One running shared server."""

    key: str
    pid: int
    socket: str
    store: str
    viewer: str | None


def running(sockets: str, states: str) -> list[Running]:
    """The servers answering on the sockets in `sockets`, by key; stale files are removed."""
    found = []
    for name in sorted(os.listdir(sockets)):
        if not name.endswith(".sock"):
            continue
        key = name.removesuffix(".sock")
        path = os.path.join(sockets, name)
        connection = connect(path)
        if connection is None:
            _remove_stale(key, sockets, states)
            continue
        try:
            pid = server_pid(connection)
        finally:
            connection.close()
        about = _about(os.path.join(sockets, f"{key}.json"))
        store = about.get("store")
        viewer = about.get("viewer")
        found.append(
            Running(
                key,
                pid,
                path,
                store if isinstance(store, str) else "?",
                viewer if isinstance(viewer, str) else None,
            )
        )
    return found


def run_status(sockets: str, states: str) -> int:
    """Print one line per running server; 0."""
    for server in running(sockets, states):
        line = f"pid {server.pid}  socket {server.socket}  store {server.store}"
        if server.viewer is not None:
            token = os.path.join(states, f"{server.key}.token")
            line += f"  viewer {server.viewer} (token in {token})"
        sys.stdout.write(line + "\n")
    return 0


def run_stop(sockets: str, states: str, key: str | None) -> int:
    """Stop every running server (with `key`: that one only), each waited for; 0, or 1 when
    one did not exit in time."""
    status = 0
    for server in running(sockets, states):
        if key is not None and server.key != key:
            continue
        try:
            os.kill(server.pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        if not _exited(server.pid, time.monotonic() + STOP_TIMEOUT):
            sys.stderr.write(
                f"acp-server attach: server {server.pid} did not exit within {STOP_TIMEOUT:g} s\n"
            )
            status = 1
    return status


def _exited(pid: int, deadline: float) -> bool:
    """Whether process `pid` is gone (or a zombie: its work is over) before `deadline`."""
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat", "rb") as file:
                if file.read().rpartition(b")")[2].split()[0] == b"Z":
                    return True
        except FileNotFoundError:
            return True
        except OSError:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
        time.sleep(POLL_INTERVAL)
    return False


def _about(path: str) -> dict[str, object]:
    try:
        with open(path, "rb") as file:
            about = json.load(file)
    except (OSError, ValueError):
        return {}
    return about if isinstance(about, dict) else {}


def _remove_stale(key: str, sockets: str, states: str) -> None:
    """Remove the files of the server `key` that no longer answers, unless it is starting."""
    try:
        lock = os.open(os.path.join(states, f"{key}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(lock)
        return  # a relay is starting it
    try:
        for suffix in (".sock", ".json"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(sockets, key + suffix))
    finally:
        os.close(lock)
