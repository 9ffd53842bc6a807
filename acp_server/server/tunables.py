"""Numbers a server reads once from its environment (`ACP_SERVER_FOLLOW_BUFFER`,
`ACP_SERVER_SEARCH_SECONDS`, `ACP_SERVER_REPLAY_PAGE`): each has a default, and a value that is
not a number at or above its minimum is warned about and replaced by the default."""

from __future__ import annotations

import logging
import math
import os

log = logging.getLogger(__name__)


def env_int(name: str, default: int, *, minimum: int) -> int:
    """The integer in the environment variable `name`, else `default`."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    if raw.strip().isdigit() and int(raw) >= minimum:
        return int(raw)
    log.warning("%s=%r is not an integer of at least %d: using %d", name, raw, minimum, default)
    return default


def env_seconds(name: str, default: float) -> float:
    """The non-negative number of seconds in the environment variable `name`, else
    `default`."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if math.isfinite(value) and value >= 0:
        return value
    log.warning("%s=%r is not a non-negative number: using %g", name, raw, default)
    return default
