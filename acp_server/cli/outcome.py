"""How a command ends: the exit statuses every command shares, and a quiet end when the reader
of its output goes away.

0 when all went well; 1 when the command ran and found problems (a log or a session that fails a
check, a session it could not copy); 2 when it could not run at all (a bad argument, a store it
cannot open or reach, a log it cannot read). `arguments.EXIT_STATUS` says the same in `--help`.
A closed output (`acp-server log cat ... | head`) is neither: the command stops without a word,
with the status of a program ended by SIGPIPE, as `cat` would.
"""

from __future__ import annotations

import os
import signal
from typing import Final

from ..storage.errors import SessionNotFound, UnsupportedStore

PROBLEMS: Final = 1
CANNOT_RUN: Final = 2
READER_GONE: Final = 128 + signal.SIGPIPE
"""The status of a command whose output was closed by its reader."""


def failure_status(exc: Exception) -> int:
    """The status of a command stopped by `exc` (a `LogError` or an `OSError`): a store it
    cannot open, a session that is not there or a file it cannot read could not let it run; a
    log it read and found wrong is a problem found."""
    if isinstance(exc, UnsupportedStore | SessionNotFound | OSError):
        return CANNOT_RUN
    return PROBLEMS


def reader_gone() -> int:
    """Stop writing to a closed output: stdout now goes nowhere, so that the interpreter's last
    flush cannot fail again at exit. The status to exit with."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        pass  # nothing more will be written anyway
    return READER_GONE
