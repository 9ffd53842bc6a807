"""How far one turn may go: the defaults the loop and the command line share.

Kept apart from the loop, so that the server's configuration can name them without importing
the loop and its tools at start-up.
"""

from __future__ import annotations

from typing import Final

DEFAULT_MAX_STEPS: Final = 50
"""Model calls one turn may make before it ends with `turn/end {kind: "max-steps"}`."""
