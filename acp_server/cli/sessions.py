"""`acp-server sessions list [--store URL] [--json]`: the sessions of a store, from the shell.

What is listed is what `session/list` lists (the store API's `list_sessions`; subagent sessions
belong to their parent's conversation and are left out), the most recently active first: id,
title, working directory, last activity and size. The size is the bytes the session's log takes
where the store keeps it: a log file's size, read from the file system; a database's rows,
read whole to count them (there is no cheaper figure for them).
"""

from __future__ import annotations

import json
import sys
from typing import TextIO

import anyio
import msgspec

from ..server.listing import iso_time
from ..storage.api import ListedSession, Store
from ..storage.errors import LogError
from ..storage.url import StoreUrl, open_store
from .log import UsageError, resolve_log_path
from .outcome import CANNOT_RUN, failure_status
from .store_choice import StoreChoiceError, chosen_store, describe


class Row(msgspec.Struct, frozen=True, rename="camel"):
    """One listed session, as `--json` prints it (times in ISO 8601, UTC)."""

    id: str
    title: str | None
    cwd: str
    created_at: str
    last_activity: str
    size: int
    """Bytes the session's log takes where the store keeps it."""


def run_sessions_list(store: str | None, *, as_json: bool, out: TextIO = sys.stdout) -> int:
    """List the sessions of `store` (None: the one `serve` would use); the exit status."""
    try:
        choice, url = chosen_store(store, None)
    except StoreChoiceError as exc:
        sys.stderr.write(f"acp-server sessions list: error: {exc}\n")
        return CANNOT_RUN
    if url.path is not None and not url.path.exists():
        rows: list[Row] = []  # nothing was ever stored there
    else:
        try:
            rows = anyio.run(_rows, url)
        except BrokenPipeError:
            raise
        except (LogError, OSError) as exc:
            sys.stderr.write(f"acp-server sessions list: error: {exc}\n")
            return failure_status(exc)
    if as_json:
        out.write(json.dumps([msgspec.to_builtins(row) for row in rows], indent=2) + "\n")
    elif rows:
        out.write(table(rows))
    else:
        out.write(f"no sessions in {describe(choice, url)}\n")
    return 0


async def _rows(url: StoreUrl) -> list[Row]:
    store = open_store(url)
    try:
        listed = [item for item in await store.list_sessions() if item.header.origin != "subagent"]
        listed.sort(key=lambda item: (_last_activity(item), item.header.id), reverse=True)
        return [
            Row(
                item.header.id,
                item.title,
                item.header.cwd,
                iso_time(item.header.created_at),
                iso_time(_last_activity(item)),
                await _size(url, store, item.header.id),
            )
            for item in listed
        ]
    finally:
        await store.aclose()


def _last_activity(item: ListedSession) -> int:
    """Its last event's time; its creation's when it has none, or when its log could not be
    summarized (as `session/list` shows it)."""
    return item.updated_at if item.updated_at is not None else item.header.created_at


async def _size(url: StoreUrl, store: Store, session_id: str) -> int:
    session_dir = url.log_file(session_id)
    if session_dir is not None:
        try:
            return resolve_log_path(session_dir).stat().st_size
        except UsageError as exc:
            raise LogError(str(exc)) from None
    lines = await store.lines(session_id)

    def read_all() -> int:
        for _ in lines:
            pass
        return lines.size

    return await anyio.to_thread.run_sync(read_all)


def table(rows: list[Row]) -> str:
    """The rows as a table for a terminal, a header line first."""
    cells = [("ID", "TITLE", "CWD", "LAST ACTIVITY (UTC)", "SIZE")] + [
        (
            row.id,
            _clipped(row.title or "-", 40),
            row.cwd,
            row.last_activity[:19].replace("T", " "),
            human_size(row.size),
        )
        for row in rows
    ]
    widths = [max(len(line[k]) for line in cells) for k in range(5)]
    lines = []
    for line in cells:
        left = "  ".join(
            cell.ljust(width) for cell, width in zip(line[:4], widths[:4], strict=True)
        )
        lines.append(f"{left}  {line[4].rjust(widths[4])}")
    return "".join(line.rstrip() + "\n" for line in lines)


def _clipped(text: str, width: int) -> str:
    """`text` on one line, at most `width` characters (an ellipsis where it was cut)."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def human_size(size: int) -> str:
    """Bytes as a person reads them: `812 B`, `12.3 kB`, `4.0 MB` (powers of 1000)."""
    if size < 1000:
        return f"{size} B"
    value = size / 1000
    for unit in ("kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            break
        value /= 1000
    return f"{value:.1f} {unit}"
