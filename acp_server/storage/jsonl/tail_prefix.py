"""`tail-prefix.jsonl` beside a log: what a tail open (`core.tail`) keeps of the log before its
base, so that finding it reads nothing of the log's start.

The file's first line says which seqs it covers (`through`: the events `[0, through)`), how
many `step/start`s they hold and the seqs of the latest `context/compaction` and
`session/rewind` among them (-1: none); each further line is one of the latest settings among them, as
the log holds it. Its writer rewrites it whole (replaced by a rename) when the log is opened for
continuation and when it closes. It is a cache: a tail open that finds none, or one that
covers more than the log holds, reads the whole log as a load without a tail does; a log
appended to by a build that keeps no such file leaves it covering less, and the events after
it are read from the log.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Final

import msgspec

from ...core.events import EventError, decode_event
from ...core.tail import TailPrefix

log = logging.getLogger(__name__)

PREFIX_NAME: Final = "tail-prefix.jsonl"


class _Covers(msgspec.Struct):
    through: int
    steps: int
    compaction: int = -1
    rewind: int = -1


_encoder: Final = msgspec.json.Encoder()
_covers: Final = msgspec.json.Decoder(_Covers)


def read_prefix(path: Path) -> tuple[int, TailPrefix] | None:
    """The seq the file covers up to and its prefix; None when there is none to trust."""
    try:
        lines = path.read_bytes().split(b"\n")
        covers = _covers.decode(lines[0])
        events = [decode_event(line) for line in lines[1:] if line]
    except (OSError, msgspec.DecodeError, EventError):
        return None
    if covers.through < 0 or covers.steps < 0 or any(e.seq >= covers.through for e in events):
        return None
    return covers.through, TailPrefix(events, covers.steps, covers.compaction, covers.rewind)


def write_prefix(path: Path, through: int, prefix: TailPrefix) -> None:
    """Replace the file (a cache: a failure is only logged, nothing is fsynced)."""
    covers = _Covers(through, prefix.steps, prefix.compaction, prefix.rewind)
    lines = [_encoder.encode(covers)]
    lines += [_encoder.encode(event) for event in prefix.events]
    temporary = path.with_name(path.name + ".new")
    try:
        temporary.write_bytes(b"\n".join([*lines, b""]))
        os.replace(temporary, path)
    except OSError as exc:
        log.debug("%s: tail prefix not kept: %s", path, exc)
        with contextlib.suppress(OSError):
            temporary.unlink()
