"""`acp-server attach [serve flags]`: a stdio relay to the user's shared server for those flags.

An editor spawns this instead of `serve`. The relay finds the server its flags key
(`attach_flags`) by its Unix socket (`attach_places`), starts it in the background when none
answers, and passes bytes both ways unchanged until either side ends: the protocol's lines are
the server's, frame for frame. Its end of input closes its half of the connection, and the
server ends that connection (the sessions it opened are closed, as when a stdio client goes);
the server going away (`--stop`) ends the relay with one line on stderr. Run by a client's
terminal auth method (`ACP_SERVER_LOGIN=1`, SPEC 4.4) it logs in, as `serve` would, and relays
nothing.

Start-up is what an editor waits for, so this module imports the standard library's lightest
parts and nothing that imports asyncio, anyio or msgspec (`tests/test_attach.py` checks it);
starting a server, `--status` and `--stop` import what they need when they run.

Starting a server: under the key's lock (`fcntl.flock`: two relays never start two servers),
`python -m acp_server serve --socket PATH FLAGS` in a session of its own, stdin from /dev/null,
stdout and stderr to `KEY.log` in the state directory, its directory `SERVER_CWD`, its
environment `attach_places.server_environment`'s. The relay waits for the socket up to
`START_TIMEOUT`; a server that exits first has its log's last lines shown and its exit status
returned (2 for flags it refuses).
"""

from __future__ import annotations

import _socket  # not `socket`: it imports `selectors` and `enum` besides, which a relay never uses
import os
import sys

from .attach_flags import Flags, normalise
from .attach_places import PlaceError, connect, private_dir, socket_dir, state_dir

TYPE_CHECKING = False  # `typing` costs milliseconds of every relay's start
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Final

PROGRAM: Final = "acp-server attach"
LOGIN_ENV: Final = "ACP_SERVER_LOGIN"
"""`startup.handshake.LOGIN_ENV`, mirrored (that module imports `json` and `threading`;
`tests/test_attach.py` holds this copy to it): when it is "1" this command line logs in."""
CHUNK: Final = 256 * 1024
"""Bytes read at once, either way."""

HELP: Final = """\
usage: acp-server attach [--status | --stop] [serve flags]

Relay stdio to the shared acp-server of these serve flags, over a Unix socket, starting it in
the background when none runs: what an editor spawns instead of `acp-server serve`. The same
flags (normalised: relative paths made absolute, the environment's fallbacks and the defaults
filled in) reach the same server; other flags start another. The server serves every attached
client over one session registry, and logs to the state directory
($XDG_STATE_HOME/acp-server/, else ~/.local/state/acp-server/).

options:
  -h, --help  show this help message and exit
  --status    print one line per running shared server (pid, socket, store, viewer); nothing
              when none runs
  --stop      stop every shared server; with serve flags, only the one they key
  serve flags every flag of `acp-server serve --help`; with --listen HOST:PORT the server also
              serves WebSocket and the session viewer there, its token kept in KEY.token in
              the state directory (0600, the same across restarts of that server)
"""


def main(argv: Sequence[str]) -> int:
    """Run `acp-server attach` with `argv` (the arguments after `attach`); the exit status."""
    args = list(argv)
    if os.environ.get(LOGIN_ENV) == "1":
        # The terminal auth method (SPEC 4.4) runs the command line the editor spawns, this
        # one, with ACP_SERVER_LOGIN=1: log in for the provider these flags name, as `serve`
        # does, rather than relay what the user types (their key) to a server.
        from ..cli.login import run_terminal_login

        return run_terminal_login(args)
    if "-h" in args or "--help" in args:
        sys.stdout.write(HELP)
        return 0
    action = None
    for flag in ("--status", "--stop"):
        if flag in args:
            args.remove(flag)
            action = action or flag
    environ = os.environ
    try:
        sockets = private_dir(socket_dir(environ))
        states = private_dir(state_dir(environ))
    except PlaceError as exc:
        return _fail(str(exc))
    if action is not None:
        from .attach_servers import run_status, run_stop

        if action == "--status":
            if args:
                return _fail("--status takes no serve flags", 2)
            return run_status(sockets, states)
        key = server_key(normalise(args, environ, os.getcwd())) if args else None
        return run_stop(sockets, states, key)
    flags = normalise(args, environ, os.getcwd())
    key = server_key(flags)
    path = os.path.join(sockets, f"{key}.sock")
    connection = connect(path)
    if connection is None:
        from .attach_start import StartFailed, start_server

        try:
            connection = start_server(flags, key, path, states, environ)
        except StartFailed as exc:
            if exc.message:
                _fail(exc.message)
            return exc.status
    return relay(connection)


def server_key(flags: Flags) -> str:
    """The name of the server `flags` key: a digest of their canonical text."""
    from _blake2 import blake2b  # `hashlib` would load OpenSSL first: milliseconds

    return blake2b(flags.key_text().encode(), digest_size=10).hexdigest()


def relay(connection: _socket.socket) -> int:
    """Pass stdin to `connection` and `connection` to stdout, bytes unchanged, until the
    server ends the connection; 0 when that follows the end of our input, else 1 (said on
    stderr: the server went away)."""
    import select

    poller = select.poll()
    poller.register(0, select.POLLIN)
    poller.register(connection.fileno(), select.POLLIN)
    input_ended = False
    try:
        while True:
            for fd, _ in poller.poll():
                if fd == 0:
                    try:
                        data = os.read(0, CHUNK)
                    except OSError:  # no usable input (closed, say): as if it had ended
                        data = b""
                    if data:
                        connection.sendall(data)
                        continue
                    input_ended = True
                    poller.unregister(0)
                    connection.shutdown(_socket.SHUT_WR)
                    continue
                data = connection.recv(CHUNK)
                if not data:
                    if input_ended:
                        return 0
                    return _fail("the shared server closed the connection (stopped?)")
                _write_all(1, data)
    except BrokenPipeError:
        return 0 if input_ended else 1  # the editor stopped reading: it went away
    except ConnectionError:
        return _fail("the shared server closed the connection (stopped?)")
    finally:
        connection.close()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _fail(message: str, status: int = 1) -> int:
    sys.stderr.write(f"{PROGRAM}: {message}\n")
    sys.stderr.flush()
    return status
