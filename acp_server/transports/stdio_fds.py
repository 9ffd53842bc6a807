"""The protocol's private stdio descriptors, claimed before anything else can use fds 0 and 1.

Kept apart from the framing in `stdio`, which needs the event loop: `acp_server.startup.launch`
claims the streams first thing, before the server's imports, so that the early handshake
(`acp_server.startup.handshake`) can answer `initialize` while they run.
"""

from __future__ import annotations

import os
import sys
from typing import NamedTuple


class StdioFds(NamedTuple):
    """The protocol's private input and output file descriptors."""

    input: int
    output: int


_claimed: StdioFds | None = None


def claim_stdio() -> StdioFds:
    """Take the protocol streams for ourselves, before anything else runs; a second call gives
    the streams the first took.

    The protocol input and output are duplicated to private descriptors. Descriptor 1 is then
    pointed at stderr and descriptor 0 at /dev/null: stdout carries protocol frames only, and a
    child process started later (a tool, a terminal) cannot eat the client's messages.
    """
    global _claimed
    if _claimed is not None:
        return _claimed
    sys.stdout.flush()
    fds = StdioFds(input=os.dup(0), output=os.dup(1))
    os.set_inheritable(fds.input, False)
    os.set_inheritable(fds.output, False)
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    _claimed = fds
    return fds
