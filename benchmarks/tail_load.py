"""A tail load of a huge session: `session/load` with `replay.maxMessages` in a fresh process,
from the spawn to the last replayed update, and the process's peak RSS, on each engine.

Writes, through the store API, one session of `--turns` turns (default 116) in which every
`--compact-every` turns (default 10) is a `/compact` turn; every other turn is a user message,
then `--steps` steps (default 10) that each stream a run of `--chunks` text chunks (default
30), call a tool and get a result of 3/4 to all of `--output-kib` KiB (default 1024; sizes drawn
from a fixed seed), then a last step answering in text. With the defaults: about 40,000 events
and 1 GiB. The session is
written once per engine (JSONL, SQLite, and PostgreSQL: the database `--postgres URL` names,
or else a throwaway cluster started as the tests start theirs, `tests/postgres_server.py`, or
left out when there is none or with `--no-postgres`), closed
as a writer closes it, then loaded by fresh `acp-server serve --store URL` processes, each
`--rounds` times (default 3): after `initialize`, `session/load` with `maxMessages`
(`--max-messages`, default 50); the figure is from the spawn to the last `session/update`
before the load's response, and the peak RSS is the process's own (`wait4`'s `ru_maxrss`)
once it has exited. The processes run with their bytecode cached (a warm-up round, not
counted, writes the caches), as an installed package's is. Each round checks that the replay starts at a turn (`replayedFromSeq`) and
has more before it.

`--compare DIR` loads the same session, in alternating rounds, with the server of another
checkout too (its root first on `PYTHONPATH`): on a machine whose load moves, compare within
one run.

Run from the repository root: `python benchmarks/tail_load.py [--turns N] [--output-kib K]
[--postgres URL] [--keep DIR] [--compare DIR]`. Human-readable lines go to stderr; stdout gets exactly one
line, `TAIL_LOAD_RESULT {json}`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from acp_server.core.compaction import summary_request
from acp_server.core.content import TextContent
from acp_server.core.events import (
    AssistantChunk,
    AssistantChunkData,
    AssistantMessage,
    AssistantMessageData,
    AssistantMessageEvent,
    CommandResult,
    CommandResultData,
    ContextCompaction,
    ContextCompactionData,
    SessionEvent,
    StepData,
    StepEnd,
    StepStart,
    ToolCall,
    ToolCallData,
    ToolResult,
    ToolResultData,
    TurnEnd,
    TurnEndData,
    TurnEndReasonCompleted,
    TurnStart,
    TurnStartData,
    UserMessage,
    UserMessageData,
    UserMessageEvent,
)
from acp_server.core.header import SESSION_FORMAT_VERSION, SessionHeader
from acp_server.core.stream import AssistantText, AssistantToolCall, TextDelta
from acp_server.storage.api import Store
from acp_server.storage.url import open_store, parse_store_url

SESSION_ID = "0" * 31 + "1"


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Builder:
    def __init__(self, writer: Any, rng: random.Random, output_kib: int, chunks: int) -> None:
        self.writer = writer
        self.chunks = chunks
        self.rng = rng
        self.output_kib = output_kib
        self.seq = 0
        self.batch: list[SessionEvent] = []
        self.bytes = 0

    def add(self, kind: Any, data: Any, **envelope: Any) -> None:
        self.batch.append(kind(self.seq, 1_700_000_000_000 + self.seq, data, **envelope))
        self.seq += 1

    async def flush(self) -> None:
        self.writer.append(self.batch)
        self.batch = []
        await self.writer.flush()

    def step(self, turn: int, step: int, tool: bool) -> None:
        self.add(StepStart, StepData(turn, step))
        first = self.seq
        words = [f"w{k} " for k in range(self.chunks)]
        for word in words:
            self.add(AssistantChunk, AssistantChunkData(turn, step, TextDelta(0, word)))
        blocks: list[Any] = [AssistantText("".join(words))]
        call_id = f"call_{turn}_{step}"
        if tool:
            blocks.append(AssistantToolCall(call_id, "read_file", f'{{"path": "f{step}.txt"}}'))
        message = AssistantMessage(f"m{turn}.{step}", blocks)
        self.add(
            AssistantMessageEvent,
            AssistantMessageData(turn, step, message),
            source_range=(first, self.seq - 1),
        )
        if tool:
            self.add(ToolCall, ToolCallData(turn, step, call_id, "read_file", '{"path": "f"}'))
            size = self.rng.randint(self.output_kib * 768, self.output_kib * 1024)
            output = ("x" * 1023 + "\n") * (size // 1024)
            self.bytes += len(output)
            result = ToolResultData(turn, step, call_id, [TextContent(output)])
            self.add(ToolResult, result)
        self.add(StepEnd, StepData(turn, step))


async def write_session(
    store: Store, turns: int, every: int, steps: int, kib: int, chunks: int
) -> int:
    header = SessionHeader(
        version=SESSION_FORMAT_VERSION, id=SESSION_ID, created_at=1_700_000_000_000, cwd="/tmp"
    )
    writer = await store.create(header)
    built = Builder(writer, random.Random(7), kib, chunks)
    for turn in range(turns):
        before = built.seq - 1
        built.add(TurnStart, TurnStartData(turn))
        compact = turn > 0 and turn % every == 0
        text = "/compact" if compact else f"prompt {turn}"
        built.add(
            UserMessageEvent, UserMessageData(turn, UserMessage(f"u{turn}", [TextContent(text)]))
        )
        if compact:
            built.add(StepStart, StepData(turn, 0))
            summary = AssistantMessage(f"m{turn}.0", [AssistantText(summary_request(""))])
            built.add(AssistantMessageEvent, AssistantMessageData(turn, 0, summary))
            built.add(StepEnd, StepData(turn, 0))
            built.add(ContextCompaction, ContextCompactionData(turn, 0, before))
            done = [TextContent("The conversation was compacted.")]
            built.add(CommandResult, CommandResultData(turn, "compact", done))
        else:
            for step in range(steps):
                built.step(turn, step, tool=True)
                await built.flush()
            built.step(turn, steps, tool=False)
        built.add(TurnEnd, TurnEndData(turn, TurnEndReasonCompleted()))
        await built.flush()
    await writer.close()
    return built.seq


def load_once(url: str, max_messages: int, cwd: str, env: dict[str, str]) -> dict[str, Any]:
    command = [sys.executable, "-m", "acp_server", "serve", "--store", url, "--titles", "off"]
    started = time.perf_counter()
    # `-m` puts the working directory first on the path: the checkout's root, as PYTHONPATH says.
    checkout = env["PYTHONPATH"].split(os.pathsep)[0]
    process = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=checkout,
    )
    assert process.stdin is not None and process.stdout is not None

    def send(request_id: int, method: str, params: Any) -> None:
        frame = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        assert process.stdin is not None
        process.stdin.write(json.dumps(frame).encode() + b"\n")
        process.stdin.flush()

    def until(request_id: int) -> tuple[dict[str, Any], float | None, int]:
        last = None
        updates = 0
        assert process.stdout is not None
        while True:
            frame = json.loads(process.stdout.readline())
            if frame.get("method") == "session/update":
                last = time.perf_counter()
                updates += 1
            elif frame.get("id") == request_id:
                return frame, last, updates

    send(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    until(1)
    initialized = time.perf_counter()
    params = {
        "sessionId": SESSION_ID,
        "cwd": cwd,
        "mcpServers": [],
        "_meta": {"acp-server": {"replay": {"maxMessages": max_messages}}},
    }
    send(2, "session/load", params)
    frame, last, updates = until(2)
    answered = time.perf_counter()
    process.stdin.close()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    assert "result" in frame, frame
    meta = frame["result"]["_meta"]["acp-server"]
    assert meta["hasMore"] is True and meta["replayedFromSeq"] > 0, meta
    end = last if last is not None else answered
    return {
        "ms": round((end - started) * 1000),
        "answered_ms": round((answered - started) * 1000),
        "initialized_ms": round((initialized - started) * 1000),
        "updates": updates,
        "replayed_from": meta["replayedFromSeq"],
        "peak_rss_mb": round(usage.ru_maxrss / 1024),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=116)
    parser.add_argument("--compact-every", type=int, default=10)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--chunks", type=int, default=30)
    parser.add_argument("--output-kib", type=int, default=1024)
    parser.add_argument("--max-messages", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--engines", default="jsonl,sqlite")
    parser.add_argument("--postgres", default=None, help="a PostgreSQL URL (an empty database)")
    parser.add_argument(
        "--no-postgres", action="store_true", help="leave PostgreSQL out (no throwaway cluster)"
    )
    parser.add_argument("--keep", type=Path, default=None, help="build in DIR and keep it")
    parser.add_argument(
        "--compare", type=Path, default=None, help="also load with the checkout DIR's server"
    )
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="tail-load-"))
    root.mkdir(parents=True, exist_ok=True)
    urls = {
        "jsonl": f"file://{root}/sessions",
        "sqlite": f"sqlite://{root}/sessions.db",
    }
    cluster = None
    if not args.no_postgres:
        database, cluster = postgres_database(args.postgres)
        if database is not None:
            urls["postgresql"] = database
    engines = [e for e in args.engines.split(",") if e in urls]
    if "postgresql" in urls and "postgresql" not in engines:
        engines.append("postgresql")
    try:
        result = run(args, root, urls, engines)
    finally:
        if cluster is not None:
            cluster.stop()
    if args.keep is None:
        import shutil

        shutil.rmtree(root, ignore_errors=True)
    print("TAIL_LOAD_RESULT " + json.dumps(result, separators=(",", ":")))
    return 0


def postgres_database(given: str | None) -> tuple[str | None, Any]:
    """The database to run on, and the throwaway cluster to stop afterwards (or None)."""
    if given:
        return given, None
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from postgres_server import Cluster, fresh_database, server_binaries

    binaries = server_binaries()
    if binaries is None:
        say("postgresql: no server (give --postgres URL or install PostgreSQL): left out")
        return None, None
    cluster = Cluster(binaries)
    return fresh_database(cluster.start()), cluster


def run(args: argparse.Namespace, root: Path, urls: dict[str, str], engines: list[str]) -> Any:
    # Bytecode cached, as an installed package's is: a warm-up round writes the caches.
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
    result: dict[str, Any] = {"max_messages": args.max_messages, "engines": {}}
    for engine in engines:
        url = urls[engine]

        async def build(url: str = url) -> int:
            store = open_store(parse_store_url(url))
            try:
                await store.prepare()
                if await store.exists(SESSION_ID):
                    return -1
                return await write_session(
                    store,
                    args.turns,
                    args.compact_every,
                    args.steps,
                    args.output_kib,
                    args.chunks,
                )
            finally:
                await store.aclose()

        began = time.perf_counter()
        events = anyio.run(build)
        say(f"{engine}: session written ({events} events) in {time.perf_counter() - began:.1f} s")
        other = None
        if args.compare is not None:
            other = dict(env, PYTHONPATH=str(args.compare.resolve()))
            other["PYTHONPYCACHEPREFIX"] = str(root / "pycache-compare")
            load_once(url, args.max_messages, "/tmp", other)
        load_once(url, args.max_messages, "/tmp", env)  # the warm-up round
        rounds, compared = [], []
        for _ in range(args.rounds):  # alternating: the machine's load moves
            rounds.append(load_once(url, args.max_messages, "/tmp", env))
            say(f"{engine}: {rounds[-1]}")
            if other is not None:
                compared.append(load_once(url, args.max_messages, "/tmp", other))
                say(f"{engine} ({args.compare}): {compared[-1]}")
        result["engines"][engine] = {
            "events": events,
            "load_ms_median": statistics.median(r["ms"] for r in rounds),
            "load_ms": [r["ms"] for r in rounds],
            "initialized_ms": [r["initialized_ms"] for r in rounds],
            "peak_rss_mb_max": max(r["peak_rss_mb"] for r in rounds),
            "replayed_from": rounds[0]["replayed_from"],
            "updates": rounds[0]["updates"],
        }
        if compared:
            result["engines"][engine]["compare"] = {
                "load_ms_median": statistics.median(r["ms"] for r in compared),
                "peak_rss_mb_max": max(r["peak_rss_mb"] for r in compared),
            }
    return result


if __name__ == "__main__":
    sys.exit(main())
