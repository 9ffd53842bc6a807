"""The one error boundary of the server: exceptions to JSON-RPC error objects (SPEC 4).

Every error the peer can see is an `RpcError` subclass with a `CODE` and a default `MESSAGE`
(pygls-style). Exceptions raised by lower layers (msgspec validation, the session store, the log
reader) are translated in one table, `ERROR_TABLE`; anything else is an internal error whose
traceback goes to the log on stderr and never to the wire.

| code   | class                | when                                                          |
|--------|----------------------|---------------------------------------------------------------|
| -32700 | `ParseError`         | a line that is not JSON (or not UTF-8); the connection lives  |
| -32600 | `InvalidRequest`     | JSON that is not a request object; an oversized line         |
| -32601 | (jsonrpcserver's)    | an unknown method, `_`-prefixed extensions included           |
| -32602 | `InvalidParams`      | params of the wrong shape; the message names the field        |
| -32603 | `InternalError`      | a bug: no exception text on the wire, the traceback on stderr |
| -32000 | `AuthRequired`       | the model provider needs an API key and has none (SPEC 4.4)   |
| -32002 | `UnknownSession`     | a well-formed session id with no session (ACP's "resource not found") |
| -32800 | `RequestCancelled`   | the request was cancelled by `$/cancel_request` or shutdown   |
| -32010 | `SessionUnreadable`  | the session's log cannot be read: `data.reason` is `"corrupt"` (with `line` and `detail`) or `"unsupported-version"` (with `found` and `supported`) |
| -32011 | `SessionInUse`       | another process holds the session's log open for writing, or a prompt turn is running in it (`data.reason`: `"locked"` or `"prompt-running"`) |
| -32012 | `ModelRequestError`  | the model request of a prompt turn failed; `data` is `{"message", "code"?}` |
| -32013 | `StorageFailure`     | the machine refused a file operation: `data` is `{"reason", "errno"}`, e.g. `{"reason": "disk-full", "errno": "ENOSPC"}` (reasons in `STORAGE_REASONS`) |

A value the peer sent (or a log holds) is quoted in a message through `echoed`, which cuts it
to `ECHO_CHARS`; and no message goes out longer than `jsonrpc.errors.MAX_MESSAGE_CHARS` (its
middle is cut, so that msgspec's ` - at `$.path`` stays): an error never sends a megabyte back.

-32010 to -32013 are in JSON-RPC's server-error range (-32000 to -32099), next to the codes
ACP itself uses there (-32000 authentication required, -32002 resource not found); see
`docs/decisions/server-error-codes.md`.
"""

from __future__ import annotations

import errno
import logging
import re
from collections.abc import Callable
from typing import Any, Final

import msgspec
from msgspec import UNSET

from ..agent.failures import ModelRequestFailed
from ..agent.ports import ClientRequestError
from ..core.ids import InvalidSessionId
from ..jsonrpc.errors import ConnectionClosed as ConnectionClosed
from ..jsonrpc.errors import InternalError as InternalError
from ..jsonrpc.errors import InvalidParams as InvalidParams
from ..jsonrpc.errors import InvalidRequest as InvalidRequest
from ..jsonrpc.errors import ParseError as ParseError
from ..jsonrpc.errors import RequestCancelled as RequestCancelled
from ..jsonrpc.errors import RpcError
from ..storage.errors import (
    CorruptLog,
    LogLocked,
    LogWriteFailed,
    SessionNotFound,
    StaleWriter,
    UnsupportedVersion,
)

log = logging.getLogger(__name__)

ECHO_CHARS: Final = 200


def echoed(value: object, limit: int = ECHO_CHARS) -> str:
    """`value` quoted in an error message: its repr, cut to `limit` characters and "..."."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


class UnknownSession(RpcError):
    CODE = -32002
    MESSAGE = "Resource not found"

    def __init__(self, session_id: str) -> None:
        super().__init__(f"Unknown session: {session_id}", {"sessionId": session_id})


class AuthRequired(RpcError):
    """ACP's "authentication required": the provider needs a key it does not have."""

    CODE = -32000
    MESSAGE = "Authentication required"


class SessionUnreadable(RpcError):
    CODE = -32010
    MESSAGE = "Session log unreadable"


class SessionInUse(RpcError):
    CODE = -32011
    MESSAGE = "Session in use"


class ModelRequestError(RpcError):
    CODE = -32012
    MESSAGE = "Model request failed"


class StorageFailure(RpcError):
    CODE = -32013
    MESSAGE = "Storage failure"


class TooManyRequests(RpcError):
    """A connection already has as many requests in flight as it may (`--max-pending-requests`)."""

    CODE = -32014
    MESSAGE = "Too many requests in flight"


STORAGE_REASONS: Final[dict[int, tuple[str, str]]] = {
    errno.ENOSPC: ("disk-full", "the disk is full"),
    errno.EDQUOT: ("disk-full", "the disk quota is exceeded"),
    errno.EFBIG: ("file-too-large", "the log file has reached the largest size allowed"),
    errno.EROFS: ("read-only", "the sessions directory is read-only"),
    errno.EACCES: ("permission-denied", "permission to the sessions directory is denied"),
    errno.EPERM: ("permission-denied", "the operation is not permitted"),
    errno.EIO: ("io-error", "the disk reported an I/O error"),
    errno.EMFILE: ("too-many-open-files", "the server has no file descriptors left"),
    errno.ENFILE: ("too-many-open-files", "the system has no file descriptors left"),
    errno.ENOMEM: ("out-of-memory", "the system is out of memory"),
    errno.ECONNRESET: ("database-unavailable", "the connection to the store's database was lost"),
}
"""errno -> (`data.reason`, what the message says): failures of the machine, not bugs."""


ClientError = ClientRequestError
"""The client answered one of our requests with a JSON-RPC error (the agent's own class, so
that tools catch exactly what the connection raises)."""


# ---------------------------------------------------------------------------------------------
# Translations of foreign exceptions.

_MSGSPEC_PATH: Final = re.compile(r" - at `(\$[^`]*)`$")


def _from_validation(exc: msgspec.ValidationError) -> RpcError:
    # msgspec names the field in its message ("Expected `str`, got `int` - at `$.cwd`").
    text = str(exc)
    match = _MSGSPEC_PATH.search(text)
    return InvalidParams(f"Invalid params: {text}", {"path": match.group(1)} if match else UNSET)


def _from_invalid_id(exc: InvalidSessionId) -> RpcError:
    return InvalidParams.at("$.sessionId", str(exc))


def _from_not_found(exc: SessionNotFound) -> RpcError:
    return UnknownSession(_quoted_id(str(exc)))


def _quoted_id(text: str) -> str:
    # SessionNotFound's message is "unknown session 'ID'"; the id is what the client sent.
    match = re.search(r"'([^']*)'", text)
    return match.group(1) if match else text


def _from_corrupt(exc: CorruptLog) -> RpcError:
    return SessionUnreadable(
        f"Session log unreadable: line {exc.line}: {exc.reason}",
        {"reason": "corrupt", "line": exc.line, "detail": exc.reason},
    )


def _from_unsupported(exc: UnsupportedVersion) -> RpcError:
    return SessionUnreadable(
        f"Session log unreadable: format version {echoed(exc.found)} is not supported "
        f"(this build reads version {exc.supported})",
        {"reason": "unsupported-version", "found": exc.found, "supported": exc.supported},
    )


def _from_model_failure(exc: ModelRequestFailed) -> RpcError:
    data: dict[str, Any] = {"message": exc.message}
    if exc.code is not None:
        data["code"] = exc.code
    return ModelRequestError(f"Model request failed: {exc.message}", data)


def _from_locked(exc: LogLocked) -> RpcError:
    return SessionInUse(
        "Session in use: another process has it open for writing", {"reason": "locked"}
    )


def _from_stale_writer(exc: StaleWriter) -> RpcError:
    log.warning("%s", exc)
    return SessionInUse("Session in use: another writer appended to it", {"reason": "stale-writer"})


def _storage_failure(code: int | None, when: str) -> RpcError | None:
    known = STORAGE_REASONS.get(code) if code is not None else None
    if code is None or known is None:
        return None
    reason, what = known
    name = errno.errorcode[code]
    return StorageFailure(
        f"Storage failure: {what} ({name}) {when}", {"reason": reason, "errno": name}
    )


def _from_write_failure(exc: LogWriteFailed) -> RpcError | None:
    log.warning("%s", exc)
    return _storage_failure(exc.errno, "while writing the session log")


def _from_os_error(exc: OSError) -> RpcError | None:
    error = _storage_failure(exc.errno, "while accessing the sessions directory")
    if error is not None:
        # Only the message and errno reach the wire: paths stay in the server's log.
        log.warning("storage failure: %s", exc)
    return error


ERROR_TABLE: Final[tuple[tuple[type[BaseException], Callable[[Any], RpcError | None]], ...]] = (
    (RpcError, lambda exc: exc),
    (msgspec.ValidationError, _from_validation),
    (InvalidSessionId, _from_invalid_id),
    (SessionNotFound, _from_not_found),
    (CorruptLog, _from_corrupt),
    (UnsupportedVersion, _from_unsupported),
    (LogLocked, _from_locked),
    (ModelRequestFailed, _from_model_failure),
    (StaleWriter, _from_stale_writer),
    (LogWriteFailed, _from_write_failure),
    (OSError, _from_os_error),
)
"""Exception class -> the `RpcError` the peer sees. The first matching row that gives one
wins; a row may give None (an `OSError` whose errno is not a machine failure: a bug)."""


def to_rpc_error(exc: Exception, method: str = "?") -> RpcError:
    """The error to send for an exception a handler raised.

    Unexpected exceptions become a bare -32603: their text may hold paths or internals, so it
    goes to the log (with the traceback), and the peer only learns that the method failed.
    """
    for cls, translate in ERROR_TABLE:
        if isinstance(exc, cls):
            error = translate(exc)
            if error is not None:
                return error
    log.error("internal error in %s", method, exc_info=exc)
    return InternalError(f"Internal error while handling {method}")
