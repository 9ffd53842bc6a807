"""The cycle collector held off while a log is read into memory.

Reading a long log allocates a few hundred thousand lists (each row's `dt` and fragments) that
live as long as the session and can form no cycle. With the collector running, every few
hundred of them trigger a collection, and the full collections walk everything read so far:
on a 400,000-chunk log that was about a third of the read. Paused, the objects are counted as
allocated all the same, so the next collection after the read runs as it would have anyway.

Reads run in worker threads and the collector is the process's, so the pause is counted: the
collector is enabled again when the last pause ends, and only if it was enabled when the first
one began.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def collection_paused() -> Iterator[None]:
    """Hold the cycle collector off for the duration of the block."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
