"""Starting a shared server for `acp-server attach`, when none answers on its socket.

Under the key's lock (`KEY.lock` in the state directory, `fcntl.flock`), so that relays started
together start one server: the first starts it and waits, the others wait for the lock and find
it answering. The server runs detached (a session of its own, stdin from /dev/null, stdout and
stderr to `KEY.log`, truncated at each start), in `SERVER_CWD` (sessions carry their own
directory), with the relay's environment filtered (`attach_places.server_environment`).

`--listen` without `--token-file` gets the token of `KEY.token` (made once, 0600): the viewer's
address stays the same across restarts of that server. Standard library only.
"""

from __future__ import annotations

import _socket
import fcntl
import os
import sys
import time
from collections.abc import Mapping
from typing import Final

from .attach_flags import Flags
from .attach_places import connect, server_environment

START_TIMEOUT: Final = 60.0
"""Seconds a starting server has to answer on its socket."""
POLL_INTERVAL: Final = 0.005
"""Seconds between looks at a starting server's socket."""
LOG_TAIL_LINES: Final = 20
"""Lines of a server's log shown when it exits before it answers."""


class StartFailed(Exception):
    """The server could not be started: `message` (may be empty: already said) and the exit
    status for the relay."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def server_cwd(environ: Mapping[str, str]) -> str:
    """Where a server runs: the home directory, else `/`."""
    home = environ.get("HOME", "")
    return home if os.path.isabs(home) and os.path.isdir(home) else "/"


def server_argv(flags: Flags, path: str, token_file: str | None) -> list[str]:
    """The command that starts the server of `flags` on the socket `path`."""
    argv = [sys.executable, "-m", "acp_server", "serve", "--socket", path, *flags.argv()]
    if token_file is not None:
        argv += ["--token-file", token_file]
    return argv


def start_server(
    flags: Flags, key: str, path: str, states: str, environ: Mapping[str, str]
) -> _socket.socket:
    """A connection to the server of `flags` at `path`, started first unless another relay
    started it meanwhile; `StartFailed` when it cannot be."""
    lock = os.open(os.path.join(states, f"{key}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        connection = connect(path)
        if connection is not None:
            return connection  # another relay started it while we waited
        return _start(flags, key, path, states, environ)
    finally:
        os.close(lock)  # the lock goes with it


def _start(
    flags: Flags, key: str, path: str, states: str, environ: Mapping[str, str]
) -> _socket.socket:
    import subprocess

    token_file = None
    if flags.values.get("--listen") is not None and flags.values.get("--token-file") is None:
        token_file = _token_file(os.path.join(states, f"{key}.token"))
    log_path = os.path.join(states, f"{key}.log")
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    api_key_env = flags.values.get("--api-key-env")
    also = (api_key_env,) if isinstance(api_key_env, str) else ()
    try:
        server = subprocess.Popen(
            server_argv(flags, path, token_file),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            cwd=server_cwd(environ),
            env=server_environment(environ, also),
            start_new_session=True,
        )
    except OSError as exc:
        raise StartFailed(f"cannot start the server: {exc.strerror or exc}", 1) from None
    finally:
        os.close(log)
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        connection = connect(path)
        if connection is not None:
            return connection
        status = server.poll()
        if status is not None:
            sys.stderr.write(_tail(log_path))
            raise StartFailed("", status if status > 0 else 1)
        if time.monotonic() > deadline:
            raise StartFailed(
                f"the server did not answer within {START_TIMEOUT:g} s (its log: {log_path})", 1
            )
        time.sleep(POLL_INTERVAL)


def _token_file(path: str) -> str:
    """`path`, holding a token: made now (0600) if it is not there."""
    import secrets

    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path
    with os.fdopen(descriptor, "w") as file:
        file.write(secrets.token_urlsafe(32) + "\n")
    return path


def _tail(path: str) -> str:
    """The last lines of the log at `path`."""
    try:
        with open(path, "rb") as file:
            text = file.read().decode(errors="replace")
    except OSError:
        return ""
    lines = text.splitlines(keepends=True)[-LOG_TAIL_LINES:]
    return "".join(lines)
