"""Where the user's shared servers live, and what they may be given: standard library only.

- The sockets are in a directory of the user's alone (`socket_dir`): `$XDG_RUNTIME_DIR/acp-server/`,
  else `acp-server-<uid>/` in the temporary directory. It is made 0700; one that is not a
  directory of ours, or that group or others may enter, is refused (`PlaceError`), never used.
  Beside each socket `KEY.sock` the server keeps `KEY.json`: its pid, store and viewer address.
- Each server's log, start lock and viewer token are in the user's state directory
  (`state_dir`): `$XDG_STATE_HOME/acp-server/`, else `~/.local/state/acp-server/`, named
  `acp-server` as the platform's data and config directories are.
- The server's environment is the relay's, filtered (`server_environment`): only what `serve`
  reads, or what the programs it runs for a session need, passes.
"""

from __future__ import annotations

import _socket  # not `socket`: it imports `selectors` and `enum` besides, which a relay never uses
import os
import stat

TYPE_CHECKING = False  # `typing` costs milliseconds of every relay's start
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Final

NAME: Final = "acp-server"

KEY_VARIABLES: Final = frozenset({"OPENAI_API_KEY", "ANTHROPIC_API_KEY"})
"""The providers' key variables (`providers.names.key_variables()`, mirrored: that module is
the one list; `tests/test_attach.py` holds this copy to it)."""

PASSED_VARIABLES: Final = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "TERM",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "NO_PROXY",
        "https_proxy",
        "http_proxy",
        "no_proxy",
    }
)
"""Variables the server is given as the relay has them: the user's identity, locale and paths
(the commands a session runs need them), and what the HTTP client reads to reach a live
provider (proxies, certificates)."""
PASSED_PREFIXES: Final = ("LC_", "XDG_", "ACP_SERVER_", "ACP_REPLAY_", "PYTHON")
"""Prefixes of passed variables: the locale's categories, the XDG directories, the server's
own settings, and the interpreter's (`PYTHONPATH` of a development checkout, the bytecode
cache's place)."""


class PlaceError(Exception):
    """A directory that cannot safely hold the servers' files: the message says why."""


def socket_dir(environ: Mapping[str, str]) -> str:
    """The directory of the user's server sockets (not made here)."""
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(runtime):
        return os.path.join(runtime, NAME)
    temporary = environ.get("TMPDIR", "")
    return os.path.join(temporary if os.path.isabs(temporary) else "/tmp", f"{NAME}-{os.getuid()}")


def state_dir(environ: Mapping[str, str]) -> str:
    """The directory of the servers' logs, locks and tokens (not made here)."""
    state = environ.get("XDG_STATE_HOME", "")
    if os.path.isabs(state):
        return os.path.join(state, NAME)
    return os.path.join(os.path.expanduser("~"), ".local", "state", NAME)


def private_dir(path: str) -> str:
    """`path`, made if need be (mode 0700), once it is checked to be a directory of this user
    that no one else may enter; `PlaceError` otherwise."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        info = os.lstat(path)
    except OSError as exc:
        raise PlaceError(f"cannot make {path}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise PlaceError(f"{path} is not a directory")
    if info.st_uid != os.getuid():
        raise PlaceError(f"{path} belongs to another user (uid {info.st_uid})")
    if info.st_mode & 0o077:
        raise PlaceError(
            f"{path} may be entered by others (mode {stat.S_IMODE(info.st_mode):o}): "
            "it must be 0700"
        )
    return path


def server_environment(environ: Mapping[str, str], also: Iterable[str] = ()) -> dict[str, str]:
    """The variables of `environ` a server is started with: the ones `PASSED_VARIABLES`,
    `PASSED_PREFIXES` and `KEY_VARIABLES` name, and `also` (the key variable `--api-key-env`
    names). The server takes a key out of its environment at once (`providers.secret`)."""
    passed = PASSED_VARIABLES | KEY_VARIABLES | frozenset(also)
    return {
        name: value
        for name, value in environ.items()
        if name in passed or name.startswith(PASSED_PREFIXES)
    }


def connect(path: str) -> _socket.socket | None:
    """A connection to the server whose socket is `path`; None when none answers there."""
    connection = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        connection.connect(path)
    except OSError:
        connection.close()
        return None
    return connection


def server_pid(connection: _socket.socket) -> int:
    """The pid of the process at the other end of `connection` (`SO_PEERCRED`)."""
    import struct

    credentials = connection.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    pid: int = struct.unpack("3i", credentials)[0]
    return pid
