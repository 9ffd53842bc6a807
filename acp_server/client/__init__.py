"""The client half of acp-server (SPEC 3.3): history stitched into one gapless event list, and a
small async client that spawns the server and speaks to it.

- `journal`: the pure `Journal` (no I/O): pages, follow snapshots and live events in, one
  contiguous event list out, gaps reported as values, broken history refused;
- `connection`: `AcpClient`, an anyio JSON-RPC client over a spawned `acp-server` process;
- `fold`: `ConversationFold`, the conversation's nodes folded from its events (the same fold
  as the browser's `fold.js`);
- `follow`: `Follow`, a `session.follow` subscription whose journal stays gapless across
  overflows;
- `process`: the one subprocess driver: `ServerPipes` (anyio, under `AcpClient`) and
  `ServerProcess`, the same driven from blocking code (the snapshot runner and the tests), and
  `serve_command`, the command they spawn.
"""

from ..core.history import HistoryProtocolError
from .connection import (
    AcpClient,
    Loaded,
    Page,
    answer_server_request,
    default_answer,
    session_address,
    subagent_address,
)
from .errors import ConnectionClosed, RpcError
from .fold import ConversationFold, FoldError, apply_change, default_definitions, fold_events
from .follow import Follow
from .journal import Gap, Journal

__all__ = [
    "AcpClient",
    "ConnectionClosed",
    "ConversationFold",
    "FoldError",
    "Follow",
    "Gap",
    "HistoryProtocolError",
    "Journal",
    "Loaded",
    "Page",
    "RpcError",
    "answer_server_request",
    "apply_change",
    "default_answer",
    "default_definitions",
    "fold_events",
    "session_address",
    "subagent_address",
]
