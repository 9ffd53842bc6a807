"""What names a kept file content (a checkpoint's blob): its SHA-256 digest, lowercase hex."""

from __future__ import annotations

import hashlib
import re
from typing import Final

_DIGEST: Final = re.compile(r"[0-9a-f]{64}")


def blob_digest(data: bytes) -> str:
    """The SHA-256 digest of `data`, lowercase hex: the name it is kept under."""
    return hashlib.sha256(data).hexdigest()


def check_digest(sha256: str) -> str:
    """`sha256` when it is a digest as `blob_digest` writes it; `ValueError` otherwise (it names
    a file of a JSONL store: nothing else may reach the path)."""
    if not _DIGEST.fullmatch(sha256):
        raise ValueError(f"not a SHA-256 digest: {sha256!r}")
    return sha256
