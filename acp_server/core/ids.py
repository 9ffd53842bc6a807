"""Identifiers: session id validation, checked before an id reaches the file system."""

from __future__ import annotations

import re
from typing import Final

SESSION_ID_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


class InvalidSessionId(ValueError):
    """A session id that does not match `^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`."""


def validate_session_id(session_id: object) -> str:
    """Return `session_id` if it is a valid session id, else raise `InvalidSessionId`."""
    if not isinstance(session_id, str) or SESSION_ID_PATTERN.fullmatch(session_id) is None:
        shown = repr(session_id) if len(repr(session_id)) <= 40 else repr(session_id)[:37] + "..."
        raise InvalidSessionId(
            f"invalid session id {shown}: must match ^[A-Za-z0-9][A-Za-z0-9_-]{{0,127}}$"
        )
    return session_id
