"""A huge session on each engine: a 1 GiB, 40,000-event log, then what a user waits for on it.

The session (fixed seed) is shaped like a long agentic one: turns of a user message, then steps
that each stream a short chunk run (text deltas, then the tool call's delta) and call a tool
whose output is 1 KiB to 1 MiB of command-output-like text, then a last step that answers. Every
tenth turn starts with a compaction, as the loop writes one when the context is full (SPEC
4.6): a summarising step, then `context/compaction` through the seq before the turn. The output
sizes are drawn, then scaled so that the log comes to `--size-mib` (the record envelopes on top);
the last turn's chunk runs grow to make exactly `--events` events.

It is written straight through each engine's `Writer` (`store.create`, `append`, `flush` at
every step's and turn's end, as the loop flushes), not through model turns: that writes 1 GiB in
about a minute. Then, each in a fresh `acp-server serve --store URL` spawned as an editor spawns
it (stdio, bytecode cached):

- tail load: `session/load` with `_meta: {"acp-server": {"replay": {"maxMessages": 50}}}`, the
  time from the spawn to the last update the load sent (the last frame before its response,
  the session's mode, options and commands included), and the server's peak RSS (`VmHWM` of
  `/proc/PID/status`, read after the response, before the server is told to exit);
- newest page: `session.page` of the newest `--page-messages` messages (default 4), from the
  request to the response, after `initialize` and a request the server answers only once it
  has started;
- middle page: the same page ending at the middle seq of the log;
- verify: `acp-server log verify --store URL SESSION_ID`, the whole process's wall time.

PostgreSQL is the database `--postgres URL` names (an empty one), or else a throwaway cluster
started as `store.py` starts one.

Goals (issue 38): the tail load under 1 s to its last update with a peak RSS under 300 MB; the
middle page under 100 ms.

Run from the repository root:
`python benchmarks/huge.py [--engines jsonl,sqlite,postgresql] [--size-mib 1024] [--events 40000]
[--keep DIR]`. `--size-mib 64` makes a quick run. Human-readable lines go to stderr; stdout gets
exactly one line, `HUGE_RESULT {json}`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from store import postgres_database, store_bytes  # noqa: E402

from acp_server.core.content import TextContent  # noqa: E402
from acp_server.core.events import (  # noqa: E402
    AssistantChunk,
    AssistantChunkData,
    AssistantMessage,
    AssistantMessageData,
    AssistantMessageEvent,
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
from acp_server.core.header import SESSION_FORMAT_VERSION, SessionHeader  # noqa: E402
from acp_server.core.stream import (  # noqa: E402
    AssistantText,
    AssistantToolCall,
    BlockEnd,
    BlockStart,
    Finish,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from acp_server.storage.url import open_store, parse_store_url  # noqa: E402

SEED = 20261207
SESSION_ID = "huge"
START_TIME = 1_760_000_000_000
MIB = 1 << 20
MAX_OUTPUT = MIB
MIN_OUTPUT = 1024
TOOL_STEPS = (4, 8)
"""Tool-calling steps per turn (inclusive range)."""
DELTAS = (2, 10)
"""Text deltas in each step's chunk run (inclusive range)."""
COMPACT_EVERY = 10
TAIL = 50
ENVELOPE_BYTES = 160
"""About what one record costs beside the tool outputs' text (for the size scaling only)."""
TIMEOUT_S = 900.0
READ_SIZE = 1 << 20
CUT_MARK = b'"_meta":{"acp-server":{"cut":'
GOALS = {"tailLoadSpawnToLastUpdateMs": 1000, "tailLoadPeakRssMB": 300, "middlePageMs": 100}

# fmt: off
WORDS = ["the", "a", "of", "to", "and", "in", "is", "that", "it", "for", "as", "with", "on", "be", "this", "by", "are", "from", "or", "an", "which", "session", "event", "log", "chunk", "row", "packed", "decode", "stream", "token", "provider", "model", "request", "response", "message", "tool", "call", "result", "file", "path", "line", "error", "value", "state", "order", "history", "function", "module", "package", "server", "client", "protocol", "buffer", "window", "terminal"]
# fmt: on


def log(line: str = "") -> None:
    print(line, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# The session.


@dataclass(frozen=True)
class TurnShape:
    compacts: bool
    deltas: list[int]
    """Per step, text deltas in its chunk run: the summarising step's first when it compacts,
    then each tool step's, then the answer's."""


def turn_events(shape: TurnShape) -> int:
    tool_steps = len(shape.deltas) - 1 - shape.compacts
    summary = 7 + shape.deltas[0] if shape.compacts else 0
    # A tool step: step/start, block-start, deltas, block-end, the call's block (3), finish,
    # message, tool/call, tool/result, step/end. The answer: 6 around its deltas.
    return (
        3
        + summary
        + sum(shape.deltas[shape.compacts : -1])
        + 11 * tool_steps
        + (6 + shape.deltas[-1])
    )


def plan_turns(rng: random.Random, events: int) -> list[TurnShape]:
    """Turn shapes making exactly `events` events: the last turn's runs take what is left."""
    turns: list[TurnShape] = []
    total = 0
    while True:
        compacts = len(turns) > 0 and len(turns) % COMPACT_EVERY == 0
        steps = rng.randint(*TOOL_STEPS) + 1 + compacts
        shape = TurnShape(compacts, [rng.randint(*DELTAS) for _ in range(steps)])
        size = turn_events(shape)
        if total + size > events:
            break
        turns.append(shape)
        total += size
    if not turns:
        raise SystemExit(f"--events {events} is too few for one turn")
    turns[-1].deltas[-1] += events - total
    return turns


def output_sizes(rng: random.Random, count: int, total: int) -> list[int]:
    """`count` sizes between MIN_OUTPUT and MAX_OUTPUT bytes, spread unevenly, summing to
    about `total` (clipped at the bounds, the rest shared among the others)."""
    weights = [rng.uniform(0.05, 1.0) for _ in range(count)]
    sizes = [float(MIN_OUTPUT)] * count
    free = list(range(count))
    left = max(0.0, total - MIN_OUTPUT * count)
    while free and left > 1:
        scale = left / sum(weights[i] for i in free)
        still = []
        for i in free:
            room = MAX_OUTPUT - sizes[i]
            grow = min(room, weights[i] * scale)
            sizes[i] += grow
            left -= grow
            if grow < room:
                still.append(i)
        if len(still) == len(free):
            break
        free = still
    return [int(s) for s in sizes]


def corpus(rng: random.Random) -> str:
    """4 MiB of ASCII lines like a command's output, sliced for every tool output."""
    lines: list[str] = []
    size = 0
    while size < 4 * MIB:
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 14)))
        line = f"src/{rng.choice(WORDS)}_{rng.randint(0, 99)}.py:{rng.randint(1, 4000)}: {words}\n"
        lines.append(line)
        size += len(line)
    return "".join(lines)


def session_batches(
    turns: list[TurnShape], sizes: list[int], text: str, rng: random.Random
) -> Iterator[list[SessionEvent]]:
    """The session's events on contiguous seqs from 0, in the batches the loop flushes."""
    seq = 0
    now = START_TIME
    outputs = iter(sizes)
    batch: list[SessionEvent] = []

    def add(kind: type, data: Any, **envelope: Any) -> int:
        nonlocal seq, now
        now += 3
        batch.append(kind(seq, now, data, **envelope))
        seq += 1
        return seq - 1

    def words(count: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(count))

    def run(turn: int, step: int, deltas: int) -> tuple[int, str]:
        """A text block's chunk run; its first seq and its text."""
        first = add(AssistantChunk, AssistantChunkData(turn, step, BlockStart(0, "text")))
        pieces = [words(rng.randint(1, 3)) + " " for _ in range(deltas)]
        for piece in pieces:
            add(AssistantChunk, AssistantChunkData(turn, step, TextDelta(0, piece)))
        add(AssistantChunk, AssistantChunkData(turn, step, BlockEnd(0)))
        return first, "".join(pieces)

    for turn, shape in enumerate(turns):
        turn_start = add(TurnStart, TurnStartData(turn))
        prompt = UserMessage(f"user-{turn}", [TextContent(f"Turn {turn}: {words(12)}")])
        add(UserMessageEvent, UserMessageData(turn, prompt))
        runs = iter(shape.deltas)
        step = 0
        if shape.compacts:
            add(StepStart, StepData(turn, 0))
            yield batch
            batch = []
            first, summary = run(turn, 0, next(runs))
            add(AssistantChunk, AssistantChunkData(turn, 0, Finish("stop")))
            message = AssistantMessage(f"assistant-{turn}-0", [AssistantText(summary)])
            add(
                AssistantMessageEvent,
                AssistantMessageData(turn, 0, message, Usage(90_000, 400)),
                source_range=(first, seq - 1),
            )
            add(StepEnd, StepData(turn, 0))
            add(ContextCompaction, ContextCompactionData(turn, 0, turn_start - 1))
            yield batch
            batch = []
            step = 1
        tool_steps = len(shape.deltas) - 1 - shape.compacts
        for _ in range(tool_steps):
            add(StepStart, StepData(turn, step))
            yield batch
            batch = []
            first, said = run(turn, step, next(runs))
            call_id = f"call-{turn}-{step}"
            arguments = json.dumps({"command": "grep", "args": ["-rn", rng.choice(WORDS), "src"]})
            add(AssistantChunk, AssistantChunkData(turn, step, BlockStart(1, "tool-call")))
            delta = ToolCallDelta(1, call_id, arguments, "run_command")
            add(AssistantChunk, AssistantChunkData(turn, step, delta))
            add(AssistantChunk, AssistantChunkData(turn, step, BlockEnd(1)))
            add(AssistantChunk, AssistantChunkData(turn, step, Finish("tool-calls")))
            content = [AssistantText(said), AssistantToolCall(call_id, "run_command", arguments)]
            message = AssistantMessage(f"assistant-{turn}-{step}", content)
            add(
                AssistantMessageEvent,
                AssistantMessageData(turn, step, message, Usage(20_000, 60)),
                source_range=(first, seq - 1),
            )
            call = add(ToolCall, ToolCallData(turn, step, call_id, "run_command", arguments))
            size = next(outputs)
            start = rng.randrange(len(text) - size)
            output = [TextContent(text[start : start + size])]
            raw = {"exitCode": 0, "signal": None, "truncated": False, "timedOut": False}
            add(
                ToolResult,
                ToolResultData(turn, step, call_id, output, raw_output=raw),
                source_range=(call, call),
            )
            add(StepEnd, StepData(turn, step))
            yield batch
            batch = []
            step += 1
        add(StepStart, StepData(turn, step))
        yield batch
        batch = []
        first, answer = run(turn, step, next(runs))
        add(AssistantChunk, AssistantChunkData(turn, step, Finish("stop")))
        message = AssistantMessage(f"assistant-{turn}-{step}", [AssistantText(answer)])
        add(
            AssistantMessageEvent,
            AssistantMessageData(turn, step, message, Usage(21_000, 40)),
            source_range=(first, seq - 1),
        )
        add(StepEnd, StepData(turn, step))
        add(TurnEnd, TurnEndData(turn, TurnEndReasonCompleted()))
        yield batch
        batch = []


@dataclass(frozen=True)
class Session:
    turns: list[TurnShape]
    sizes: list[int]
    events: int
    messages: int


def plan_session(size_mib: int, events: int, seed: int) -> Session:
    rng = random.Random(seed)
    turns = plan_turns(rng, events)
    outputs = sum(len(t.deltas) - 1 - t.compacts for t in turns)
    total = size_mib * MIB - events * ENVELOPE_BYTES
    sizes = output_sizes(rng, outputs, total)
    messages = sum(len(t.deltas) + 1 for t in turns)
    return Session(turns, sizes, sum(map(turn_events, turns)), messages)


async def write_session(url: str, session: Session, seed: int, cwd: str) -> float:
    """Write the session through the engine's writer; the seconds it took."""
    rng = random.Random(seed + 1)
    text = corpus(rng)
    store = open_store(parse_store_url(url))
    started = time.perf_counter()
    try:
        header = SessionHeader(
            version=SESSION_FORMAT_VERSION, id=SESSION_ID, created_at=START_TIME, cwd=cwd
        )
        writer = await store.create(header)
        for batch in session_batches(session.turns, session.sizes, text, rng):
            if batch:
                writer.append(batch)
                await writer.flush()
        await writer.close()
    finally:
        await store.aclose()
    return time.perf_counter() - started


# ---------------------------------------------------------------------------------------------
# Measuring, each in a fresh server.


@dataclass
class Reply:
    """A response, and the frames the server wrote before it."""

    frame: dict[str, Any]
    frames: int
    bytes: int
    """Of the frames before the response, each line with its newline."""
    cuts: int
    """Updates that carry a cut tool output (`_meta["acp-server"].cut`, SPEC 4.2)."""
    last_at: float
    """The `perf_counter` time of the read that held the last of them."""


class Server:
    """One `acp-server serve --store URL` over stdio, as an editor spawns it."""

    def __init__(self, url: str, env: dict[str, str], cwd: str) -> None:
        self.spawned = time.perf_counter()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "acp_server", "serve", "--store", url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            bufsize=0,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin = self.process.stdin
        self.fd = self.process.stdout.fileno()
        self.pending = b""
        self.next_id = 0

    def send(self, method: str, params: Any) -> int:
        self.next_id += 1
        frame = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.stdin.write(json.dumps(frame).encode() + b"\n")
        return self.next_id

    def until_response(self, request_id: int) -> Reply:
        """Read up to the response to `request_id`."""
        pending, reply = self.pending, Reply({}, 0, 0, 0, time.perf_counter())
        while True:
            chunk = os.read(self.fd, READ_SIZE)
            read_at = time.perf_counter()
            if not chunk:
                raise SystemExit("the server exited before answering")
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            for index, line in enumerate(lines):
                # Notifications are counted, not parsed: a replayed update may be megabytes.
                if line.startswith(b'{"jsonrpc":"2.0","id":') or b'"method"' not in line[:80]:
                    frame = json.loads(line)
                    if "method" not in frame and frame.get("id") == request_id:
                        rest = lines[index + 1 :]
                        self.pending = b"\n".join([*rest, pending]) if rest else pending
                        reply.frame = frame
                        return reply
                reply.frames += 1
                reply.bytes += len(line) + 1
                reply.cuts += CUT_MARK in line
                reply.last_at = read_at

    def call(self, method: str, params: Any) -> tuple[float, Any, Reply]:
        """Seconds from the request to its response, its result, and what came before it."""
        started = time.perf_counter()
        reply = self.until_response(self.send(method, params))
        elapsed = time.perf_counter() - started
        if "result" not in reply.frame:
            raise SystemExit(f"{method} failed: {str(reply.frame)[:300]}")
        return elapsed, reply.frame["result"], reply

    def ready(self) -> None:
        """Initialized, and past the early answer: the rest of the start is done."""
        self.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        reply = self.until_response(self.send("acp-bench/ready", {}))
        assert "error" in reply.frame, reply.frame

    def peak_rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise SystemExit("no VmHWM in /proc/PID/status")

    def close(self) -> None:
        self.stdin.close()
        status = self.process.wait(timeout=TIMEOUT_S)
        if status != 0:
            raise SystemExit(f"the server exited with status {status}")


def tail_load(url: str, env: dict[str, str], cwd: str) -> dict[str, Any]:
    server = Server(url, env, cwd)
    try:
        server.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        params = {
            "sessionId": SESSION_ID,
            "cwd": cwd,
            "mcpServers": [],
            "_meta": {"acp-server": {"replay": {"maxMessages": TAIL}}},
        }
        elapsed, result, replay = server.call("session/load", params)
        rss = server.peak_rss_bytes()
        server.close()
    finally:
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait()
    return {
        "tailLoadSpawnToLastUpdateMs": round((replay.last_at - server.spawned) * 1000, 1),
        "tailLoadRequestMs": round(elapsed * 1000, 1),
        "tailLoadUpdates": replay.frames,
        "tailLoadUpdateBytes": replay.bytes,
        "tailLoadCutOutputs": replay.cuts,
        "tailLoadPeakRssMB": round(rss / 1e6, 1),
        "tailReplayedFromSeq": result["_meta"]["acp-server"]["replayedFromSeq"],
    }


def page(url: str, env: dict[str, str], cwd: str, params: dict[str, Any]) -> tuple[float, Any]:
    server = Server(url, env, cwd)
    try:
        server.ready()
        elapsed, result, _ = server.call("session.page", params)
        server.close()
    finally:
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait()
    return elapsed, result


def verify(url: str, env: dict[str, str], cwd: str) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "acp_server", "log", "verify", "--store", url, SESSION_ID],
        env=env,
        cwd=cwd,
        capture_output=True,
        timeout=TIMEOUT_S,
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"log verify failed: {done.stdout[-2000:]!r} {done.stderr[-2000:]!r}")
    return elapsed


def engine_run(
    name: str, url: str, where: Path | str, session: Session, args: argparse.Namespace, root: Path
) -> dict[str, Any]:
    cwd = root / "workspace"
    cwd.mkdir(exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE.parent), env.get("PYTHONPATH")]))
    # Bytecode cached, as an installed package's is (see load.py): written by the first spawn.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
    written_s = anyio.run(write_session, url, session, args.seed, str(cwd))
    size = store_bytes(where)
    log(f"{name:<10} written in {written_s:.1f} s, {size / MIB:,.1f} MiB stored")
    address = {"kind": "session", "sessionId": SESSION_ID}
    page(url, env, str(cwd), {"address": address, "maxMessages": 1})  # the bytecode, cached
    result: dict[str, Any] = {"writeSeconds": round(written_s, 1), "bytesStored": size}
    result.update(tail_load(url, env, str(cwd)))
    newest_s, newest = page(
        url, env, str(cwd), {"address": address, "maxMessages": args.page_messages}
    )
    last_seq = newest["throughSeq"]
    middle = last_seq // 2
    middle_s, _ = page(
        url,
        env,
        str(cwd),
        {"address": address, "throughSeq": middle, "maxMessages": args.page_messages},
    )
    result.update(
        {
            "lastSeq": last_seq,
            "newestPageMs": round(newest_s * 1000, 1),
            "middlePageThroughSeq": middle,
            "middlePageMs": round(middle_s * 1000, 1),
            "verifySeconds": round(verify(url, env, str(cwd)), 1),
        }
    )
    log(f"{name:<10} " + "  ".join(f"{k} {v}" for k, v in result.items()))
    return result


def engine_places(
    root: Path, names: list[str], postgres: str | None
) -> list[tuple[str, str, Path | str]]:
    places: list[tuple[str, str, Path | str]] = []
    for name in names:
        if name == "jsonl":
            places.append((name, str(root / "jsonl"), root / "jsonl"))
        elif name == "sqlite":
            (root / "sqlite").mkdir(parents=True, exist_ok=True)
            db = root / "sqlite" / "sessions.db"
            places.append((name, f"sqlite://{db}", db))
        elif name == "postgresql" and postgres is not None:
            places.append((name, postgres, postgres))
    return places


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engines", default="jsonl,sqlite,postgresql")
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--events", type=int, default=40_000)
    parser.add_argument("--page-messages", type=int, default=4)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--postgres", metavar="URL", help="an empty PostgreSQL database")
    parser.add_argument(
        "--keep", metavar="DIR", type=Path, help="write the stores here and keep them"
    )
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.engines.split(",") if n.strip()]
    unknown = set(names) - {"jsonl", "sqlite", "postgresql"}
    if unknown:
        parser.error(f"unknown engines: {', '.join(sorted(unknown))}")
    session = plan_session(args.size_mib, args.events, args.seed)
    log(
        f"session: {session.events:,} events, {len(session.turns)} turns, "
        f"{session.messages:,} messages, {len(session.sizes):,} tool outputs of "
        f"{min(session.sizes):,} to {max(session.sizes):,} bytes, {sum(session.sizes) / MIB:,.1f} MiB"
    )
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        root = args.keep.resolve()
        scratch = None
    else:
        scratch = tempfile.mkdtemp(prefix="acp-huge-bench-")
        root = Path(scratch)
    results: dict[str, dict[str, Any]] = {}
    cluster = None
    try:
        database = None
        if "postgresql" in names:
            database, cluster = postgres_database(args.postgres)
        for name, url, where in engine_places(root, names, database):
            results[name] = engine_run(name, url, where, session, args, root)
    finally:
        if cluster is not None:
            cluster.stop()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    met = {
        f"{name}.{key}": engine[key] <= goal
        for name, engine in results.items()
        for key, goal in GOALS.items()
    }
    for key, ok in met.items():
        name, figure = key.split(".")
        log(
            f"goal {key}: {results[name][figure]} (goal {GOALS[figure]}): {'met' if ok else 'MISSED'}"
        )
    summary = {
        "events": session.events,
        "turns": len(session.turns),
        "messages": session.messages,
        "toolOutputs": len(session.sizes),
        "toolOutputBytes": sum(session.sizes),
        "sizeMiB": args.size_mib,
        "tail": TAIL,
        "pageMessages": args.page_messages,
    }
    print("HUGE_RESULT " + json.dumps({"session": summary, **results, "goals": GOALS, "met": met}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
