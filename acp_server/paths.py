"""How the command line names a path it cannot use: what is actually wrong with it.

`Path.exists()` is false for a symlink loop as for a missing file; an error message that says
"no such file" about a path the user can see in `ls` sends them looking in the wrong place.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path


def unreachable(path: Path) -> str:
    """Why `path` cannot be reached, for an error message: "no such file or directory", "a
    symlink loop (too many levels of symbolic links)", or what the system said."""
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symlink loop (too many levels of symbolic links)"
        if exc.errno != errno.ENOENT and exc.strerror:
            return exc.strerror[:1].lower() + exc.strerror[1:]
    return "no such file or directory"
