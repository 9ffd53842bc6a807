"""The `initialize` handshake, answered while the server is still starting.

An editor spawns the agent and sends `initialize` at once; everything it shows waits for the
answer. That answer depends on nothing but the request and whether the provider needs a key
(SPEC 4: the capabilities are fixed; the auth methods are listed for a provider that needs a key
alone, the terminal one to a client that can run it), which the launcher reads from the command
line, so it need not wait for the event loop, the store or the provider to be set up. `acp-server serve` on stdio
(`launch`, beside it) claims the protocol streams first and starts `EarlyHandshake`: a thread
that reads the first line and, when it is a plain, valid `initialize` request, answers it, while
the main thread goes on importing and starting the server. When the server is ready to read
input, `finish()` stops the thread and hands over every byte it read but did not answer, and the
params it answered, so that the connection records the client's capabilities as if it had
answered itself.

Anything the thread is not certain of (another method, a batch, odd ids, escapes, duplicate
keys, NaN, too long a line) it leaves unanswered, for the connection to answer as it always
does: an early answer is exactly the one the connection would give (`tests/test_handshake.py`).

This module is imported before everything else, so it imports only the standard library's
lightest parts; the answer's values live here, and `agent.py` builds its typed constants from
them.
"""

from __future__ import annotations

import json
import os
import select
import sys
import threading
from typing import Any, Final

from .. import __version__

PROTOCOL_VERSION: Final = 1
"""ACP v1, which `initialize` answers for versions up to 1 (here, early); 2 and later are
answered v2 by the connection (`server.v2`)."""

LOGIN_ENV: Final = "ACP_SERVER_LOGIN"
"""Set by a client running the terminal auth method (SPEC 4.4): `acp-server` logs in instead of
serving, whatever its arguments."""

AGENT_CAPABILITIES: Final[dict[str, Any]] = {
    "loadSession": True,
    "promptCapabilities": {"image": True, "audio": True, "embeddedContext": True},
    "sessionCapabilities": {
        "list": {},
        "resume": {},
        "close": {},
        "delete": {},
        "additionalDirectories": {},
        "systemPrompt": {"mode": {"override": {}}},
        "fork": {},
        "title": {},
        "status": {},
        "archive": {},
    },
    "mcpCapabilities": {"http": True, "sse": True},
    "auth": {"logout": {}},
    # Where the history API of SPEC 3 is advertised.
    "_meta": {
        "acp-server": {
            "history": {
                "page": "session.page",
                "follow": "session.follow",
                "search": "session.search",
            },
            "sessionList": {"follow": "session.list.follow"},
        }
    },
}
AGENT_INFO: Final[dict[str, Any]] = {"name": "acp-server", "version": __version__}
AGENT_AUTH: Final[dict[str, Any]] = {
    "id": "agent",
    "name": "API key",
    "description": "The key from the provider's environment variable (OPENAI_API_KEY or "
    "ANTHROPIC_API_KEY unless --api-key-env says otherwise), or the one `acp-server login` "
    "stored for that provider",
}
TERMINAL_AUTH: Final[dict[str, Any]] = {
    "type": "terminal",
    "id": "terminal",
    "name": "Log in in a terminal",
    "description": "Runs `acp-server login`: type the API key (it is not shown); it is stored "
    "for this provider, readable by you alone",
    "env": {LOGIN_ENV: "1"},
}

MAX_EARLY_LINE: Final = 64 * 1024
"""A first line longer than this is left to the connection (an `initialize` is a few hundred
bytes)."""
_ID_RANGE: Final = (-(2**63), 2**64 - 1)


def auth_methods(key_needed: bool, terminal_auth: bool) -> list[dict[str, Any]]:
    """The auth methods `initialize` lists (SPEC 4.4): none for a provider that needs no key;
    else the agent method, and the terminal one for a client that can run it."""
    if not key_needed:
        return []
    return [AGENT_AUTH, TERMINAL_AUTH] if terminal_auth else [AGENT_AUTH]


def initialize_result(terminal_auth: bool, key_needed: bool) -> dict[str, Any]:
    """The `initialize` result, for a client that can (or cannot) run the terminal method and a
    provider that needs (or does not need) a key."""
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": AGENT_CAPABILITIES,
        "authMethods": auth_methods(key_needed, terminal_auth),
        "agentInfo": AGENT_INFO,
    }


AGENT_CAPABILITIES_V2: Final[dict[str, Any]] = {
    # ACP v2's markers are objects; `session: {}` alone is the baseline session methods.
    "session": {
        "prompt": {"image": {}, "audio": {}, "embeddedContext": {}},
        "mcp": {"stdio": {}, "http": {}},
        "delete": {},
        "additionalDirectories": {},
        "systemPrompt": {"mode": {"override": {}}},
        "fork": {},
        "archive": {},
        "status": {},
        "title": {},
    },
    # v2's extension point, as v1's `agentCapabilities._meta`.
    "_meta": AGENT_CAPABILITIES["_meta"],
}
AGENT_AUTH_V2: Final[dict[str, Any]] = {
    "type": "agent",
    "methodId": AGENT_AUTH["id"],
    "name": AGENT_AUTH["name"],
    "description": AGENT_AUTH["description"],
}
TERMINAL_AUTH_V2: Final[dict[str, Any]] = {
    "type": "terminal",
    "methodId": TERMINAL_AUTH["id"],
    "name": TERMINAL_AUTH["name"],
    "description": TERMINAL_AUTH["description"],
    "env": [{"name": name, "value": value} for name, value in TERMINAL_AUTH["env"].items()],
}
"""The ACP v2 `initialize` answer's parts (`server.v2.agent` types them); v2 is never answered
early, but its values live beside v1's."""


# ---------------------------------------------------------------------------------------------
# Deciding on a first line (pure).


class _Unsure(Exception):
    """The line is not one the handshake answers by itself."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise _Unsure
    return result


def _no_constant(name: str) -> Any:
    raise _Unsure  # NaN and Infinity are not JSON


def early_answer(line: bytes, *, key_needed: bool) -> tuple[bytes, dict[str, Any]] | None:
    """The answer frame (with its newline) to `line` and the params it answered, when `line` is
    an `initialize` request the connection would answer with a result; else None. `key_needed`:
    whether the provider the server runs needs a key."""
    if len(line) > MAX_EARLY_LINE or b"\\u" in line:
        return None  # escapes: the two JSON parsers differ on lone surrogates
    try:
        message = json.loads(
            line.decode("utf-8"), object_pairs_hook=_no_duplicates, parse_constant=_no_constant
        )
    except (_Unsure, ValueError, RecursionError):
        return None
    if (
        not isinstance(message, dict)
        or message.keys() != {"jsonrpc", "id", "method", "params"}
        or message["jsonrpc"] != "2.0"
        or message["method"] != "initialize"
    ):
        return None
    request_id, params = message["id"], message["params"]
    if not _plain_id(request_id) or not isinstance(params, dict):
        return None
    version = params.get("protocolVersion")
    if type(version) is not int or not 0 <= version <= 1:
        return None  # v2 and later are the connection's to answer
    if not _meta_ok(params, "_meta"):
        return None
    result = initialize_result(_terminal_auth(params.get("clientCapabilities")), key_needed)
    frame = json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "result": result}, separators=(",", ":")
    )
    return frame.encode() + b"\n", params


def _plain_id(value: Any) -> bool:
    if type(value) is int:
        return _ID_RANGE[0] <= value <= _ID_RANGE[1]
    return type(value) is str


def _meta_ok(value: dict[str, Any], key: str) -> bool:
    return value.get(key) is None or isinstance(value[key], dict)


def _bools_ok(value: dict[str, Any], *keys: str) -> bool:
    return all(type(value.get(key, False)) is bool for key in keys)


def _terminal_auth(capabilities: Any) -> bool:
    """Whether the client can run the terminal auth method, read as the connection reads its
    capabilities: a malformed capabilities object counts as none (the schema's "default on
    error")."""
    if not isinstance(capabilities, dict):
        return False
    fs = capabilities.get("fs", {})
    auth = capabilities.get("auth", {})
    well_formed = (
        isinstance(fs, dict)
        and _bools_ok(fs, "readTextFile", "writeTextFile")
        and _meta_ok(fs, "_meta")
        and isinstance(auth, dict)
        and _bools_ok(auth, "terminal")
        and _meta_ok(auth, "_meta")
        and _bools_ok(capabilities, "terminal")
        and _meta_ok(capabilities, "_meta")
    )
    return well_formed and auth.get("terminal", False) is True


# ---------------------------------------------------------------------------------------------
# The thread.


class EarlyHandshake:
    """Answers a first `initialize` on `input_fd`/`output_fd` while the server starts, for a
    provider that needs a key or not (`key_needed`)."""

    def __init__(self, input_fd: int, output_fd: int, *, key_needed: bool) -> None:
        self.input_fd = input_fd
        self.output_fd = output_fd
        self.key_needed = key_needed
        self._wake_read, self._wake_write = os.pipe()
        self._read = bytearray()
        self.answered: dict[str, Any] | None = None
        """The params of the `initialize` answered, if one was."""
        self.failure: OSError | None = None
        self._thread = threading.Thread(target=self._run, name="acp-handshake", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def finish(self) -> bytes:
        """Stop reading; the bytes read and not answered, for the connection to read first."""
        os.write(self._wake_write, b"x")
        self._thread.join()
        os.close(self._wake_read)
        os.close(self._wake_write)
        return bytes(self._read)

    def _run(self) -> None:
        try:
            while True:
                ready, _, _ = select.select([self.input_fd, self._wake_read], [], [])
                if self._wake_read in ready:
                    return
                chunk = os.read(self.input_fd, 65536)
                if not chunk:
                    return  # the end of input: the connection sees it too
                self._read += chunk
                newline = self._read.find(b"\n")
                if newline >= 0 or len(self._read) > MAX_EARLY_LINE:
                    break
            if newline >= 0:
                decided = early_answer(bytes(self._read[:newline]), key_needed=self.key_needed)
                if decided is not None:
                    frame, self.answered = decided
                    _write_all(self.output_fd, frame)
                    del self._read[: newline + 1]
        except OSError as exc:  # the connection meets the same trouble and reports it
            self.failure = exc


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


_started: EarlyHandshake | None = None


def start(input_fd: int, output_fd: int, *, key_needed: bool) -> None:
    """Answer the first `initialize` on these descriptors while the process starts (once), for
    a provider that needs a key or not."""
    global _started
    if _started is None and sys.platform != "win32":  # select() polls pipes on POSIX only
        _started = EarlyHandshake(input_fd, output_fd, key_needed=key_needed)
        _started.start()


def started() -> EarlyHandshake | None:
    """The handshake `start` began in this process, if any."""
    return _started
