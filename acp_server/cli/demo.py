"""`acp-server demo`: the main job end to end, for someone who has never seen the project.

It spawns the real server as a subprocess, drives the bundled recording through it as an
editor would (a prompt that streams thoughts and text, reads a file, keeps a plan, writes the
fix and runs it, each of those two after asking permission), renders the conversation in the
terminal, then starts a fresh server process that loads the session and pages its history, and
ends with the log's figures.
Everything happens in a temporary directory that is removed at the end, unless `--keep` names
a directory to keep the workspace and the session log in.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import anyio
from rich.console import Console
from rich.table import Table

from ..client import AcpClient
from ..client.connection import session_address
from ..core.chunk_rows import ROW_CLASSES, pack_chunk_runs
from ..core.content import TextContent
from ..core.events import UserMessageEvent
from ..core.replay_script import parse_fixture
from ..providers.bundled import DEMO_PROJECT
from ..providers.replay import bundled_demo_fixture
from ..storage.jsonl.log import read_log
from ..storage.jsonl.writer import encode_records

PACE_MS_ON_TERMINAL: Final = 6
"""Replay pace when a person watches: fast, but visibly streaming."""

_STATUS_MARK: Final = {"pending": "·", "in_progress": "…", "completed": "✓", "failed": "✗"}
_PLAN_MARK: Final = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}


def recorded_prompt() -> str:
    """The user's words in the bundled recording, sent as the demo's prompt."""
    path = bundled_demo_fixture()
    fixture = parse_fixture(str(path), path.read_bytes().splitlines())
    for event in fixture.events:
        if type(event) is UserMessageEvent:
            return "".join(b.text for b in event.data.message.content if isinstance(b, TextContent))
    raise RuntimeError(f"{path}: the recording has no user message")


class Transcript:
    """Renders `session/update`s as an editor shows them: streamed text, thoughts, tools, plan.

    Streamed text is wrapped by hand at word boundaries: it arrives in fragments, and a
    terminal line must not overflow the console's width however the fragments fall.
    """

    INDENT: Final = "    "

    def __init__(self, console: Console) -> None:
        self.console = console
        self.streaming: str | None = None  # the kind of chunk being streamed on the current line
        self.column = 0
        self.partial = ""
        """The end of the stream so far when it stops inside a word: held until the word ends."""
        self.style = ""
        self.titles: dict[str, str] = {}

    def _end_stream(self) -> None:
        if self.streaming is not None:
            self._emit(self.partial)
            self.partial = ""
            self.console.print()
            self.streaming = None

    def _line(self, text: str) -> None:
        self._end_stream()
        self.console.print(text, markup=False, highlight=False)

    def _stream(self, kind: str, text: str) -> None:
        labels = {
            "agent_thought_chunk": "thinking",
            "agent_message_chunk": "agent",
            "user_message_chunk": "you",
        }
        if self.streaming != kind:
            self._end_stream()
            label = labels[kind] + ": "
            self.console.print(label, end="", style="bold", highlight=False)
            self.streaming = kind
            self.column = len(label)
            self.style = "dim italic" if kind == "agent_thought_chunk" else ""
        text = self.partial + text
        words = re.split(r"(\s+)", text)
        self.partial = words.pop() if words and not words[-1].isspace() else ""
        self._emit("".join(words))

    def _emit(self, text: str) -> None:
        width = self.console.width
        for token in re.split(r"(\s+)", text):
            if not token:
                continue
            if "\n" in token:
                self.console.print("\n" + self.INDENT, end="")
                self.column = len(self.INDENT)
                continue
            if self.column + len(token) > width and self.column > len(self.INDENT):
                self.console.print("\n" + self.INDENT, end="")
                self.column = len(self.INDENT)
            if token.isspace() and self.column == len(self.INDENT):
                continue  # no blank at the start of a wrapped line
            self.console.print(token, end="", style=self.style, markup=False, highlight=False)
            self.column += len(token)

    def show(self, update: dict[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        if kind in ("agent_message_chunk", "agent_thought_chunk", "user_message_chunk"):
            self._stream(kind, update.get("content", {}).get("text", ""))
        elif kind == "tool_call":
            self.titles[update["toolCallId"]] = update["title"]
            self._line(f"  tool {update['title']} ({update['kind']})")
        elif kind == "tool_call_update" and update.get("status") in ("completed", "failed"):
            title = self.titles.get(update["toolCallId"], update["toolCallId"])
            self._line(f"  {_STATUS_MARK[update['status']]} {title}: {update['status']}")
        elif kind == "plan":
            self._line("  plan")
            for entry in update["entries"]:
                self._line(f"    {_PLAN_MARK.get(entry['status'], '[?]')} {entry['content']}")

    def close(self) -> None:
        self._end_stream()


def _permission_answerer(console: Console, transcript: Transcript) -> Callable[[str, Any], Any]:
    async def answer(method: str, params: Any) -> Any:
        if method == "session/request_permission":
            title = params.get("toolCall", {}).get("title", "a tool call")
            transcript._line(f"  ? permission asked: {title} -> allowed once")
            return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
        from ..client.errors import RpcError

        raise RpcError(f"the demo client does not implement {method}", code=-32601)

    return answer


async def _run(console: Console, root: Path, pace_ms: int) -> dict[str, Any]:
    workspace = root / "workspace"
    sessions = root / "sessions"
    workspace.mkdir()
    for name, content in DEMO_PROJECT.items():
        (workspace / name).write_bytes(content)
    transcript = Transcript(console)
    prompt = recorded_prompt()

    console.rule("[bold]1. A prompt, streamed live from a fresh acp-server process")
    console.print(f"[dim]workspace {workspace}[/dim]", highlight=False)
    async with AcpClient.spawn(
        "--pace-ms",
        str(pace_ms),
        sessions_dir=sessions,
        on_request=_permission_answerer(console, transcript),
    ) as client:
        await client.initialize()
        session_id = await client.new_session(workspace)
        transcript.show(
            {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": prompt}}
        )
        transcript.close()
        stop = await client.prompt(session_id, prompt, on_update=transcript.show)
        transcript.close()
    console.print(
        f"[dim]stop reason: {stop}; hello.py now reads: {(workspace / 'hello.py').read_text().strip()}[/dim]",
        highlight=False,
    )

    console.rule("[bold]2. A second process loads the session and pages its history")
    async with AcpClient.spawn(sessions_dir=sessions) as client:
        await client.initialize()
        # `initialize` is answered while the server is still starting; the list is answered
        # once it has started, so what is timed next is the load alone.
        listed = await client.request("session/list", {"cwd": str(workspace)})
        assert [s["sessionId"] for s in listed["sessions"]] == [session_id]
        started = time.perf_counter()
        loaded = await client.load_session(session_id, workspace)
        load_ms = (time.perf_counter() - started) * 1000
        journal = await client.history(session_address(session_id), max_messages=2)
    console.print(
        f"replayed {len(loaded.updates)} updates (whole blocks, not the token tape) "
        f"in {load_ms:.0f} ms; paged back {len(journal.events)} events",
        highlight=False,
    )
    log_path = sessions / session_id / "session.jsonl"
    contents = read_log(log_path)
    events = contents.events
    assert journal.events == events, "paging did not give back the log's events"
    return {
        "events": len(events),
        "rows": sum(1 for r in contents.records if type(r) in ROW_CLASSES),
        "records": len(contents.records),
        "packed": log_path.stat().st_size,
        "unpacked": len(encode_records([contents.header, *events])),
        "canonical": len(encode_records([contents.header, *pack_chunk_runs(events)])),
        "load_ms": load_ms,
        "replayed": len(loaded.updates),
        "stop": stop,
    }


def _figures(console: Console, figures: dict[str, Any]) -> None:
    console.rule("[bold]3. What the session log holds")
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column(justify="right")
    table.add_row("events", f"{figures['events']:,}")
    table.add_row("lines in the log", f"{figures['records'] + 1:,}")
    table.add_row("chunk rows", f"{figures['rows']:,}")
    table.add_row("bytes, packed (on disk)", f"{figures['packed']:,}")
    table.add_row("bytes, one event a line", f"{figures['unpacked']:,}")
    table.add_row("packed / unpacked", f"{figures['packed'] / figures['unpacked']:.1%}")
    table.add_row("time to load (ms)", f"{figures['load_ms']:.0f}")
    table.add_row("updates replayed on load", f"{figures['replayed']:,}")
    console.print(table)
    console.print(
        "[green]Every streamed chunk is in the log; paging gave back exactly the log's events.[/green]"
    )


def _unusable_keep(keep: Path) -> str | None:
    """Why `keep` cannot be the demo's directory (it is made if missing), or None."""
    try:
        keep.mkdir(parents=True, exist_ok=True)
        if not keep.is_dir():
            return f"not a directory: {keep}"
        if any(keep.iterdir()):
            return f"{keep} is not empty"
    except FileExistsError:  # something that is not a directory is in the way
        return f"not a directory: {keep}"
    except OSError as exc:
        return f"cannot use {keep}: {exc.strerror or exc}"
    return None


def run_demo(keep: Path | None = None, console: Console | None = None) -> int:
    if console is None:
        console = Console(width=80)
    pace = PACE_MS_ON_TERMINAL if console.is_terminal else 0
    if keep is not None:
        problem = _unusable_keep(keep)
        if problem is not None:  # SPEC 8: one line on stderr, status 2
            print(f"acp-server demo: error: --keep: {problem}", file=sys.stderr)
            return 2
        figures = anyio.run(_run, console, keep, pace)
    else:
        root = Path(tempfile.mkdtemp(prefix="acp-server-demo-"))
        try:
            figures = anyio.run(_run, console, root, pace)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    _figures(console, figures)
    if keep is not None:
        console.print(f"[dim]kept: {keep}/workspace and {keep}/sessions[/dim]", highlight=False)
    return 0
