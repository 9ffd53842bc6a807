"""`acp-server store copy SRC DST [--session ID ...]`, `store verify URL` and `store init URL`.

`copy` copies sessions between any two stores (SPEC 2.6), record for record: the same header
and the same records, so the same logical events. A session the destination already holds is
left alone when it is the same session (a second copy changes nothing) and refused when it is
another one of the same id. `verify` runs `log verify` over every session of a store, after
SQLite's own check of the whole file for a SQLite store (a damaged one fails at once). `init`
creates a database store's tables (a store is also made on first use): it says which schema
version the store has, and refuses one of another version. `verify` and `init` without a URL
work on the store `serve` would use. `copy` and `verify` show a progress bar on a terminal.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Callable, Iterator
from typing import TextIO

import anyio

from ..core.ids import InvalidSessionId, validate_session_id
from ..storage.api import Store, copy_blobs
from ..storage.errors import LogError
from ..storage.url import StoreUrl, check_store_url, open_store, parse_store_url
from .log import run_log_command, verify_lines, write_report
from .outcome import CANNOT_RUN, failure_status
from .store_choice import StoreChoiceError, chosen_store, describe


class _Usage(Exception):
    """A URL or an id that names nothing: one line, exit status 2."""


def _url(text: str | None, *, must_exist: bool) -> StoreUrl:
    """The store `text` names; None: the one `serve` would use."""
    if text is None:
        try:
            choice, url = chosen_store(None, None)
        except StoreChoiceError as exc:
            raise _Usage(str(exc)) from None
        if must_exist and url.path is not None and not url.path.exists():
            raise _Usage(f"{describe(choice, url)}: no such store")
        return url
    try:
        url = parse_store_url(text)
    except ValueError as exc:
        raise _Usage(str(exc)) from None
    problem = check_store_url(url)
    if problem is None and must_exist and url.path is not None and not url.path.exists():
        problem = f"{url.shown}: no such store"
    if problem is not None:
        raise _Usage(problem)
    return url


@contextlib.contextmanager
def _progress(total: int, label: str) -> Iterator[Callable[[], None]]:
    """A progress bar on stderr when it is a terminal; `advance()` after each session."""
    if not sys.stderr.isatty() or total < 2:
        yield lambda: None
        return
    from rich.progress import Progress

    with Progress(transient=True) as progress:
        task = progress.add_task(label, total=total)
        yield lambda: progress.advance(task)


def run_store_command(
    action: str, urls: list[str | None], sessions: list[str] | None, out: TextIO = sys.stdout
) -> int:
    """Run one `store` action (a URL None: the store `serve` would use); its exit status
    (`outcome`: 1 for problems found, 2 when it could not run)."""
    try:
        if action == "copy":
            source = _url(urls[0], must_exist=True)
            target = _url(urls[1], must_exist=False)
            for session_id in sessions or []:
                validate_session_id(session_id)
            return anyio.run(_copy, source, target, sessions, out)
        if action == "init":
            return anyio.run(_init, _url(urls[0], must_exist=False), out)
        return anyio.run(_verify, _url(urls[0], must_exist=True), out)
    except (_Usage, InvalidSessionId) as exc:
        sys.stderr.write(f"acp-server store {action}: error: {exc}\n")
        return CANNOT_RUN
    except BrokenPipeError:
        raise  # the reader went away: the command line ends quietly
    except (LogError, OSError) as exc:
        sys.stderr.write(f"acp-server store {action}: error: {exc}\n")
        return failure_status(exc)


async def _copy(
    source_url: StoreUrl, target_url: StoreUrl, wanted: list[str] | None, out: TextIO
) -> int:
    source = open_store(source_url)
    try:
        target = open_store(target_url)
        try:
            return await _copy_between(source, target, wanted, out)
        finally:
            await target.aclose()
    finally:
        await source.aclose()


async def _copy_between(source: Store, target: Store, wanted: list[str] | None, out: TextIO) -> int:
    ids = wanted if wanted else await source.session_ids()
    copied = unchanged = 0
    failed = False
    with _progress(len(ids), "copying") as advance:
        for session_id in ids:
            try:
                log = await source.read(session_id)
                if await target.exists(session_id):
                    there = await target.read(session_id)
                    if there.header != log.header or there.events != log.events:
                        raise LogError(
                            f"session {session_id}: {target.url} holds another session of this "
                            "id: not overwritten"
                        )
                    unchanged += 1
                else:
                    await target.write_copy(log.header, log.records)
                    copied += 1
                # Also for one already there: a copy cut short before its blobs is completed.
                await copy_blobs(source, session_id, target, session_id)
            except LogError as exc:
                sys.stderr.write(f"acp-server store copy: {session_id}: {exc}\n")
                failed = True
            advance()
    out.write(f"copied {copied} session{'s' if copied != 1 else ''}")
    out.write(f", {unchanged} already there unchanged\n" if unchanged else "\n")
    return 1 if failed else 0


async def _init(url: StoreUrl, out: TextIO) -> int:
    store = open_store(url)
    try:
        await store.prepare()
    finally:
        await store.aclose()
    out.write(f"{url.shown}: ready\n")
    return 0


async def _verify(url: StoreUrl, out: TextIO) -> int:
    store = open_store(url)
    try:
        # A session's checks read only its own rows: damage anywhere else in a database file
        # (the message index, a free page) would pass them.
        damage = await store.damage()
        ids = [] if damage else await store.session_ids()
        if damage:
            for finding in damage:
                out.write(f"{url.shown}: {finding}\n")
            out.write(f"FAILED: {url.shown} is damaged: no session verified\n")
            return 1
        failed = 0
        with _progress(len(ids), "verifying") as advance:
            for session_id in ids:
                failed += await _verify_session(url, store, session_id, out) != 0
                advance()
    finally:
        await store.aclose()
    out.write(
        f"{'FAILED' if failed else 'OK'}: {len(ids) - failed} of {len(ids)} "
        f"session{'s' if len(ids) != 1 else ''} verified\n"
    )
    return 1 if failed else 0


async def _verify_session(url: StoreUrl, store: Store, session_id: str, out: TextIO) -> int:
    """`log verify` of one session: of its file where it has one, else of its stored lines."""
    log_file = url.log_file(session_id)
    if log_file is not None:
        text = io.StringIO()
        status = await anyio.to_thread.run_sync(run_log_command, "verify", log_file, text)
        out.write(text.getvalue())
        return status
    lines = await store.lines(session_id)
    report = await anyio.to_thread.run_sync(verify_lines, lines)
    return write_report(lines.path, report, out)
