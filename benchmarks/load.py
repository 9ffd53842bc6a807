"""`session/load` of a long session: acp-server beside an SDK-based agent, and what a load reads.

Builds, in a temporary directory and from a fixed seed, one session log of 1,000 turns: each a
user message (one text block) and one assistant step streaming a text block of 400 text-delta
chunks (1 to 8 characters of prose-like text each), so 2,000 messages and 400,000 chunks:

    turn/start, user/message, step/start, block-start, 400 text-deltas, block-end,
    finish(stop), assistant/message (sourceRange = its chunks), step/end, turn/end(completed)

The log is written through the project's own `SessionStore.create` / `LogWriter`, packed, in the
batches the agent loop would flush (SPEC 2.4): once before the model request, then every 100 ms
of stream time (chunks arrive 2 to 40 ms apart, so a batch holds about five), then at the step's
and the turn's end. `flush()` stands in for the loop's `sync()`: the file layout is the same.
The writer also keeps the chunk checks of each step's chunk lines beside the log
(`chunk-checks.jsonl`, see `acp_server.core.chunk_checks`). `--history seed` builds instead
`codec.py`'s 116-turn, 417,220-event session, packed in one pass and written in one batch.

Then, in one run:

(a) acp-server: `python -m acp_server serve --sessions-dir D`, spawned fresh for each round;
    after `initialize`, the time from writing `session/load` to reading its response (and to
    reading the last update before it), with the notifications before it counted and their
    bytes summed (each line with its newline);
    The same rounds also spawn the server with `--replay` and a large fixture
    (`large_fixture.py`, about 6 MB), as a snapshot suite starts it: from the spawn to the last
    update, against the server without it;
(b) the baseline, `benchmarks/sdk_load_agent.py D`: an agent built on the official
    `agent-client-protocol` SDK (`acp.run_agent`) that reads the same log with `json`, expands
    every chunk row into events, and replays the same completed content (one
    `agent_message_chunk` per message; see its docstring). Same spawning, same client loop (which
    parses every frame with `json.loads`); rounds alternate between the two agents, each figure
    is the median. Every round of both must replay exactly the 2,000 messages of the log, in
    order, one notification each (checked against the text the log was built from). Then, up to
    three times, acp-server's first load of the log without its chunk checks (the file removed
    before each), as for a log another program wrote: it reads every line in full and keeps the
    checks again;
(c) in-process, best of `--repeats`: a load that decodes every event of the log,
    `read_log(path).events` then `project_load(events)`, against the path that keeps chunk rows
    packed, `read_log(path)` then `project_load(contents.records)`; and the server's own path,
    `SessionStore.continue_session` (read under the lock, recovery check) then
    `project_load(log.records_from(0))`;
(d) bytes: the replay's notification bytes as measured on the wire in (a), against a
    chunk-by-chunk replay (one `agent_message_chunk` per text-delta, the user messages as in
    ours), encoded exactly as the server frames a notification but never sent.

Every spawned agent runs with its bytecode cached, as an installed package's is (a warm-up round
writes the caches under the temporary directory, whatever PYTHONDONTWRITEBYTECODE says).
`--compare DIR` adds, in the same alternating rounds, the server of another checkout (its root
first on `PYTHONPATH`): on a machine whose load moves, compare the ratio, not the milliseconds.

Run from the repository root:
`python benchmarks/load.py [--history loop|seed] [--rounds N] [--repeats N] [--compare DIR]
[--keep]`.
Human-readable lines go to stderr; stdout gets exactly one line, `LOAD_PERF_RESULT {json}`.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
REPLAY = "acp-server --replay"
"""The server given a large fixture (`large_fixture.py`)."""

import msgspec  # noqa: E402
from large_fixture import write_large_fixture  # noqa: E402

from acp_server.core.acp_updates import (  # noqa: E402
    AgentMessageChunk,
    AgentThoughtChunk,
    SessionNotification,
    SessionUpdate,
    UserMessageChunk,
    assistant_message_id,
)
from acp_server.core.chunk_rows import ROW_CLASSES, pack_chunk_runs  # noqa: E402
from acp_server.core.content import TextContent  # noqa: E402
from acp_server.core.events import (  # noqa: E402
    AssistantChunk,
    AssistantChunkData,
    AssistantMessage,
    AssistantMessageData,
    AssistantMessageEvent,
    StepData,
    StepEnd,
    StepStart,
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
from acp_server.core.projection import project_load  # noqa: E402
from acp_server.core.stream import (  # noqa: E402
    AssistantText,
    BlockEnd,
    BlockStart,
    Finish,
    ReasoningDelta,
    TextDelta,
)
from acp_server.storage.jsonl.log import read_log  # noqa: E402
from acp_server.storage.jsonl.sessions import CHECKS_NAME, SessionStore  # noqa: E402

TURNS = 1000
DELTAS_PER_MESSAGE = 400
SEED = 20260815
SESSION_ID = "load-bench"
FLUSH_INTERVAL_MS = 100
DELTA_GAP_MS = (2, 40)
READ_SIZE = 1 << 20
TIMEOUT_S = 300.0
GOAL_SDK_RATIO = 3.0
GOAL_DECODE_RATIO = 10.0
GOAL_LAST_UPDATE_S = 0.040
SESSION_STATE_UPDATES = {"current_mode_update", "config_option_update", "available_commands_update"}

# fmt: off
WORDS = ["the", "a", "of", "to", "and", "in", "is", "that", "it", "for", "as", "with", "on", "be", "this", "by", "are", "from", "or", "an", "which", "we", "can", "not", "session", "event", "log", "chunk", "row", "packed", "decode", "stream", "token", "provider", "model", "request", "response", "message", "assistant", "user", "tool", "call", "result", "file", "path", "line", "error", "value", "state", "order", "history", "because", "however", "therefore", "although", "while", "when", "where", "after", "before", "during", "since", "until", "function", "module", "package", "server", "client", "protocol", "editor", "cursor", "buffer", "window", "terminal", "über", "naïve", "café", "résumé", "façade", "jalapeño", "São", "Paulo", "Zürich", "Kraków"]
# fmt: on

T = TypeVar("T")


def say(line: str = "") -> None:
    print(line, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# The session log.


def prose(rng: random.Random, length: int) -> str:
    """At least `length` characters of prose-like text."""
    words: list[str] = []
    size = 0
    while size <= length:
        word = rng.choice(WORDS)
        if rng.random() < 0.08:
            word += rng.choice(",.;:?!")
        words.append(word)
        size += len(word) + 1
    return " ".join(words)


def write_session(
    store: SessionStore, cwd: str, rng: random.Random
) -> tuple[Path, list[str], list[str]]:
    """The benchmark session, written as the agent loop would flush it; its path, the user
    prompts and the assistant answers."""
    clock = 1_750_000_000_000
    header = SessionHeader(version=SESSION_FORMAT_VERSION, id=SESSION_ID, created_at=clock, cwd=cwd)
    writer = store.create(header)
    seq = 0
    prompts: list[str] = []
    answers: list[str] = []

    def add(kind: type, data: Any, **envelope: Any) -> None:
        nonlocal seq
        writer.append_one(kind(seq, clock, data, **envelope))
        seq += 1

    for turn in range(TURNS):
        prompt = prose(rng, rng.randint(30, 200))
        prompts.append(prompt)
        add(TurnStart, TurnStartData(turn))
        add(
            UserMessageEvent,
            UserMessageData(turn, UserMessage(f"user-{turn}", [TextContent(prompt)])),
        )
        add(StepStart, StepData(turn, 0))
        writer.flush()  # the loop syncs before each model request
        clock += rng.randint(200, 1500)
        first = seq
        add(AssistantChunk, AssistantChunkData(turn, 0, BlockStart(0, "text")))
        corpus = prose(rng, DELTAS_PER_MESSAGE * 8)
        texts: list[str] = []
        cursor = 0
        next_flush = clock + FLUSH_INTERVAL_MS
        for _ in range(DELTAS_PER_MESSAGE):
            clock += rng.randint(*DELTA_GAP_MS)
            if clock >= next_flush:  # the 100 ms flusher ran before this chunk arrived
                writer.flush()
                next_flush += FLUSH_INTERVAL_MS * ((clock - next_flush) // FLUSH_INTERVAL_MS + 1)
            size = rng.randint(1, 8)
            text = corpus[cursor : cursor + size]
            cursor += size
            texts.append(text)
            add(AssistantChunk, AssistantChunkData(turn, 0, TextDelta(0, text)))
        add(AssistantChunk, AssistantChunkData(turn, 0, BlockEnd(0)))
        add(AssistantChunk, AssistantChunkData(turn, 0, Finish("stop")))
        answers.append("".join(texts))
        message = AssistantMessage(assistant_message_id(turn, 0), [AssistantText(answers[-1])])
        add(
            AssistantMessageEvent,
            AssistantMessageData(turn, 0, message),
            source_range=(first, seq - 1),
        )
        add(StepEnd, StepData(turn, 0))
        writer.flush()  # after each step
        add(TurnEnd, TurnEndData(turn, TurnEndReasonCompleted()))
        writer.flush()  # at the turn's end
        clock += rng.randint(5_000, 60_000)
    writer.close()
    return store.log_path(SESSION_ID), prompts, answers


Shown = tuple[str, str, str]
"""A message as the replay shows it: its update kind, its text, its id."""


def shown_messages(prompts: list[str], answers: list[str]) -> list[Shown]:
    """The messages of `write_session`'s session, in order."""
    return [
        shown
        for turn, (prompt, answer) in enumerate(zip(prompts, answers, strict=True))
        for shown in (
            ("user_message_chunk", prompt, f"user-{turn}"),
            ("agent_message_chunk", answer, assistant_message_id(turn, 0)),
        )
    ]


def write_seed_session(store: SessionStore, cwd: str, seed: int) -> tuple[Path, list[Shown]]:
    """The seed-shaped session of `codec.py` (116 turns, 417,220 events), its chunks packed in
    one pass as `pack_chunk_runs` packs a whole log, written by the store's writer in one batch
    (as `acp-server store copy` writes a session); its path and its messages."""
    from codec import START_TIME, build_session

    events = build_session(seed)
    header = SessionHeader(
        version=SESSION_FORMAT_VERSION, id=SESSION_ID, created_at=START_TIME, cwd=cwd
    )
    writer = store.create(header)
    writer.write_records(pack_chunk_runs(events))
    writer.close()
    shown: list[Shown] = []
    for event in events:
        if type(event) is UserMessageEvent:
            message = event.data.message
            shown.append(("user_message_chunk", message.content[0].text, message.id))
        elif type(event) is AssistantMessageEvent:
            message = event.data.message
            shown.append(("agent_message_chunk", message.content[0].text, message.id))
    return store.log_path(SESSION_ID), shown


def expected_replay(shown: list[Shown]) -> list[dict[str, Any]]:
    """The `session/update` params of the completed-content replay of the benchmark session."""
    return [
        {
            "sessionId": SESSION_ID,
            "update": {
                "sessionUpdate": kind,
                "content": {"type": "text", "text": text},
                "messageId": message_id,
            },
        }
        for kind, text, message_id in shown
    ]


# ---------------------------------------------------------------------------------------------
# The client, the same for both agents.


class Agent:
    """One spawned agent and the client end of its stdio."""

    def __init__(
        self, name: str, command: list[str], env: dict[str, str], cwd: str, stderr_path: Path
    ) -> None:
        self.name = name
        with open(stderr_path, "ab") as stderr:
            # stderr to a file, not a pipe nobody reads: a chatty child would otherwise block.
            # Started in `cwd`, never in the repository: `python -m` puts its working directory
            # first on the path, before `PYTHONPATH`, and `--compare` would load this checkout.
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=env,
                cwd=cwd,
                bufsize=0,
            )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin = self.process.stdin
        self.fd = self.process.stdout.fileno()
        self.pending = b""
        self.next_id = 0
        self.frame_sizes: list[int] = []  # of each frame `until_response` put in its list

    def send(self, method: str, params: Any) -> int:
        self.next_id += 1
        line = json.dumps(
            {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        )
        self.stdin.write(line.encode() + b"\n")
        return self.next_id

    def until_response(
        self, request_id: int, frames: list[dict[str, Any]]
    ) -> tuple[dict[str, Any], int, float]:
        """Read and parse frames until the response to `request_id`; the others go to `frames`.
        Returns the response, the bytes of the other frames (each line with its newline) and
        the `perf_counter` time at which the read holding the last of them returned."""
        loads, read, fd, clock = json.loads, os.read, self.fd, time.perf_counter
        pending, size, last = self.pending, 0, clock()
        while True:
            chunk = read(fd, READ_SIZE)
            read_at = clock()
            if not chunk:
                raise RuntimeError(f"{self.name} closed its output before answering")
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            for index, line in enumerate(lines):
                frame = loads(line)
                if "method" not in frame and frame.get("id") == request_id:
                    rest = lines[index + 1 :]
                    self.pending = b"\n".join([*rest, pending]) if rest else pending
                    return frame, size, last
                frames.append(frame)
                self.frame_sizes.append(len(line) + 1)
                size += len(line) + 1
                last = read_at

    def call(self, method: str, params: Any) -> Any:
        frame, _, _ = self.until_response(self.send(method, params), [])
        if "result" not in frame:
            raise RuntimeError(f"{self.name}: {method} failed: {frame}")
        return frame["result"]

    def close(self) -> int:
        self.stdin.close()
        return self.process.wait(timeout=TIMEOUT_S)


def load_once(
    name: str, command: list[str], env: dict[str, str], cwd: str, stderr_path: Path
) -> dict[str, Any]:
    """Spawn, initialize, then time one `session/load` from request to response.

    acp-server answers `initialize` while it is still starting (`acp_server.startup.handshake`),
    so the load is timed after a request the server can only answer once it has started (an
    unknown method, answered -32601 by both agents): what is timed is the load, not the rest of
    the start. The time from the spawn to the last update is kept too."""
    spawned = time.perf_counter()
    agent = Agent(name, command, env, cwd, stderr_path)
    try:
        agent.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        agent.until_response(agent.send("acp-bench/ready", {}), [])
        frames: list[dict[str, Any]] = []
        params = {"sessionId": SESSION_ID, "cwd": cwd, "mcpServers": []}
        started = time.perf_counter()
        response, _, last_update = agent.until_response(agent.send("session/load", params), frames)
        seconds = time.perf_counter() - started
        status = agent.close()
    except BaseException:
        agent.process.kill()
        agent.process.wait()
        raise
    # acp-server's result carries the session's modes and config options, the SDK agent's is {}.
    if not isinstance(response.get("result"), dict):
        raise RuntimeError(f"{name}: unexpected load response {response}")
    if status != 0:
        raise RuntimeError(f"{name}: exit status {status}")
    if any(f.get("method") != "session/update" for f in frames):
        raise RuntimeError(f"{name}: a frame other than session/update before the response")
    # What follows the replay (acp-server's mode, config options and commands) is not part of it.
    replay = [
        (f, n)
        for f, n in zip(frames, agent.frame_sizes, strict=True)
        if f["params"]["update"]["sessionUpdate"] not in SESSION_STATE_UPDATES
    ]
    return {
        "seconds": seconds,
        "last_update_s": last_update - started,
        "spawn_to_last_update_s": last_update - spawned,
        "notifications": len(replay),
        "state_notifications": len(frames) - len(replay),
        "bytes": sum(n for _, n in replay),
        "params": [f["params"] for f, _ in replay],
    }


def milliseconds(rounds: list[dict[str, Any]]) -> str:
    return ", ".join(f"{r['seconds'] * 1000:.0f}" for r in rounds) + " ms"


def last_updates(rounds: list[dict[str, Any]]) -> str:
    return ", ".join(f"{r['last_update_s'] * 1000:.0f}" for r in rounds) + " ms"


# ---------------------------------------------------------------------------------------------
# In-process loads.


def best_of(repeats: int, work: Callable[[], T]) -> tuple[float, T]:
    """The best time of `repeats` runs. Like the server (which freezes its start-up objects),
    each run starts with the objects already alive moved out of the collector's way, so that
    what the benchmark itself holds does not slow the collections a load triggers."""
    best, result = float("inf"), None
    for _ in range(repeats):
        result = None
        gc.collect()
        gc.freeze()
        try:
            started = time.perf_counter()
            result = work()
            best = min(best, time.perf_counter() - started)
        finally:
            gc.unfreeze()
    return best, result  # type: ignore[return-value]  # repeats >= 1, so work() ran


def decode_every_event(path: Path) -> list[SessionUpdate]:
    return project_load(read_log(path).events)


def keep_rows_packed(path: Path) -> list[SessionUpdate]:
    return project_load(read_log(path).records)


def server_path(store: SessionStore) -> Callable[[], list[SessionUpdate]]:
    def work() -> list[SessionUpdate]:
        continued = store.continue_session(SESSION_ID, 0)
        try:
            if continued.closers:
                raise RuntimeError("the benchmark log needed recovery")
            return project_load(continued.log.records_from(0))
        finally:
            continued.writer.close()

    return work


# ---------------------------------------------------------------------------------------------
# Wire bytes.


def notification_bytes(session_id: str, update: SessionUpdate) -> int:
    """The size of a `session/update` line as the server frames it (newline included)."""
    frame = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": SessionNotification(session_id, update),
    }
    return len(msgspec.json.encode(frame)) + 1


def chunk_by_chunk(path: Path) -> tuple[int, int]:
    """A replay that sends every text delta as it was streamed: (notifications, bytes)."""
    count = size = 0
    for event in read_log(path).events:
        update: SessionUpdate | None = None
        if type(event) is UserMessageEvent:
            message = event.data.message
            for block in message.content:
                count += 1
                size += notification_bytes(SESSION_ID, UserMessageChunk(block, message.id))
            continue
        if type(event) is AssistantChunk:
            chunk, d = event.data.chunk, event.data
            message_id = assistant_message_id(d.turn, d.step)
            if type(chunk) is TextDelta:
                update = AgentMessageChunk(TextContent(chunk.text), message_id)
            elif type(chunk) is ReasoningDelta:
                update = AgentThoughtChunk(TextContent(chunk.text), message_id)
        if update is not None:
            count += 1
            size += notification_bytes(SESSION_ID, update)
    return count, size


# ---------------------------------------------------------------------------------------------
# The run.


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="loads per agent, alternating; the median counts (default 3)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="repetitions of each in-process load; the best counts (default 3)",
    )
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument(
        "--history",
        choices=("loop", "seed"),
        default="loop",
        help="loop: the 1,000-turn session written as the agent loop flushes it (the default); "
        "seed: codec.py's 116-turn, 417,220-event session, its chunks packed in one pass",
    )
    parser.add_argument(
        "--compare",
        type=Path,
        metavar="DIR",
        help="also load with the server of the checkout at DIR, in alternating rounds",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the temporary directory (its path is printed)"
    )
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="acp-load-bench-"))
    try:
        return run(args, root)
    finally:
        if args.keep:
            say(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


def run(args: argparse.Namespace, root: Path) -> int:
    workspace = root / "workspace"
    workspace.mkdir()
    sessions = root / "sessions"
    store = SessionStore(sessions)
    started = time.perf_counter()
    if args.history == "seed":
        path, shown = write_seed_session(store, str(workspace), args.seed)
    else:
        path, prompts, answers = write_session(store, str(workspace), random.Random(args.seed))
        shown = shown_messages(prompts, answers)
    contents = read_log(path)
    events = contents.events
    chunks = sum(1 for e in events if type(e) is AssistantChunk and type(e.data.chunk) is TextDelta)
    messages = sum(1 for e in events if type(e) in (UserMessageEvent, AssistantMessageEvent))
    records = len(contents.records)
    rows = sum(1 for r in contents.records if type(r) in ROW_CLASSES)
    log_bytes = path.stat().st_size
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    say(
        f"log: {messages} messages, {chunks} text-delta chunks, {len(events)} events in "
        f"{records} records ({rows} chunk rows), {log_bytes:,} bytes; "
        f"built in {time.perf_counter() - started:.1f} s"
    )
    del contents, events

    def environment(source: Path) -> dict[str, str]:
        # Bytecode cached, as an installed package's is (see startup.py): the warm-up round
        # writes it under `root`, the measured rounds read it. Otherwise, with
        # PYTHONDONTWRITEBYTECODE set, every module a load imports would be compiled again.
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(source), env.get("PYTHONPATH", "")]))
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
        return env

    serve = [sys.executable, "-m", "acp_server", "serve", "--sessions-dir", str(sessions)]
    commands = {
        "acp-server": (serve, environment(HERE.parent)),
        "sdk": (
            [sys.executable, str(HERE / "sdk_load_agent.py"), str(sessions)],
            environment(HERE.parent),
        ),
    }
    if args.compare is not None:
        commands["compare"] = (serve, environment(args.compare.resolve()))
    # The same server given a large fixture, as a snapshot suite starts it: a load never calls
    # the model, so it must not wait for the fixture to be read.
    fixture = write_large_fixture(root / "fixture")
    commands[REPLAY] = ([*serve, "--replay", str(fixture)], environment(HERE.parent))
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in commands}
    # Rounds alternate between the agents, so that a change in the machine's load during the
    # run weighs on all of them alike; the first round is a warm-up.
    for round_number in range(args.rounds + 1):
        for name, (command, env) in commands.items():
            measured = load_once(name, command, env, str(workspace), root / f"{name}.stderr")
            if round_number:
                rounds[name].append(measured)
    # The first load of a log written without its chunk checks (by another program): it reads
    # every line in full, and keeps the checks for the loads after it.
    checks = path.parent / CHECKS_NAME
    first_loads = []
    for _ in range(min(args.rounds, 3)):
        checks.unlink()
        command, env = commands["acp-server"]
        first_loads.append(
            load_once("acp-server", command, env, str(workspace), root / "first.stderr")
        )
    if not checks.exists():
        raise RuntimeError("a first load kept no chunk checks")
    ours, sdk = rounds["acp-server"], rounds["sdk"]
    problems: list[str] = []
    if hashlib.sha256(path.read_bytes()).hexdigest() != digest:
        problems.append("a load changed the log")
    expected = expected_replay(shown)
    for name, agent_rounds in [*rounds.items(), ("acp-server (first load)", first_loads)]:
        if any(r["params"] != expected for r in agent_rounds):
            problems.append(
                f"{name} did not replay the conversation's messages, in order, one notification each"
            )
    for agent_rounds in [*rounds.values(), first_loads]:
        for r in agent_rounds:
            del r["params"]
    first_last_s = statistics.median(r["last_update_s"] for r in first_loads)
    ours_s = statistics.median(r["seconds"] for r in ours)
    sdk_s = statistics.median(r["seconds"] for r in sdk)
    ours_last_s = statistics.median(r["last_update_s"] for r in ours)
    sdk_last_s = statistics.median(r["last_update_s"] for r in sdk)
    ours_spawn_s = statistics.median(r["spawn_to_last_update_s"] for r in ours)
    sdk_spawn_s = statistics.median(r["spawn_to_last_update_s"] for r in sdk)
    notifications = ours[0]["notifications"]
    wire_bytes = ours[0]["bytes"]
    say(
        f"(a) acp-server session/load: {ours_s * 1000:.0f} ms (rounds {milliseconds(ours)}), {notifications} notifications, {wire_bytes:,} bytes; last update read at {ours_last_s * 1000:.0f} ms (rounds {last_updates(ours)})"
    )
    say(
        f"(b) SDK agent session/load:  {sdk_s * 1000:.0f} ms (rounds {milliseconds(sdk)}), {sdk[0]['notifications']} notifications, {sdk[0]['bytes']:,} bytes; last update read at {sdk_last_s * 1000:.0f} ms"
    )
    say(f"    acp-server is {sdk_s / ours_s:.2f}x faster (goal {GOAL_SDK_RATIO:g}x)")
    say(
        f"    acp-server's last update at {ours_last_s * 1000:.0f} ms (goal under {GOAL_LAST_UPDATE_S * 1000:.0f} ms); the first load of the log without its chunk checks: {first_last_s * 1000:.0f} ms (rounds {last_updates(first_loads)})"
    )
    say(
        f"    from the spawn to the last update: acp-server {ours_spawn_s * 1000:.0f} ms, SDK agent {sdk_spawn_s * 1000:.0f} ms"
    )
    replay_spawn_s = statistics.median(r["spawn_to_last_update_s"] for r in rounds[REPLAY])
    fixture_bytes = fixture.stat().st_size
    say(
        f"    given a {fixture_bytes / 1e6:.1f} MB --replay fixture: {replay_spawn_s * 1000:.0f} ms from the spawn to the last update ({replay_spawn_s / ours_spawn_s:.2f}x the server without it)"
    )
    compared: dict[str, Any] = {}
    if "compare" in rounds:
        other = rounds["compare"]
        other_s = statistics.median(r["seconds"] for r in other)
        other_last_s = statistics.median(r["last_update_s"] for r in other)
        say(
            f"    compare ({args.compare}) session/load: {other_s * 1000:.0f} ms (rounds {milliseconds(other)}); last update read at {other_last_s * 1000:.0f} ms; compare / acp-server = {other_last_s / ours_last_s:.2f} (last update, medians)"
        )
        compared = {
            "compare_source": str(args.compare.resolve()),
            "compare_load_s": round(other_s, 4),
            "compare_last_update_s": round(other_last_s, 4),
            "compare_ratio_last_update": round(other_last_s / ours_last_s, 2),
        }

    decode_s, decoded = best_of(args.repeats, lambda: decode_every_event(path))
    packed_s, packed = best_of(args.repeats, lambda: keep_rows_packed(path))
    server_s, served = best_of(args.repeats, server_path(store))
    if not decoded == packed == served:
        problems.append("the in-process projections differ")
    projected_bytes = sum(notification_bytes(SESSION_ID, u) for u in packed)
    if projected_bytes != wire_bytes or len(packed) != notifications:
        problems.append(
            f"the projection encodes to {projected_bytes} bytes, the wire carried {wire_bytes}"
        )
    del decoded, packed, served
    say(
        f"(c) decode every event + project: {decode_s * 1000:.0f} ms; rows packed + project: {packed_s * 1000:.0f} ms ({decode_s / packed_s:.1f}x, goal {GOAL_DECODE_RATIO:g}x); continue_session + project: {server_s * 1000:.0f} ms"
    )

    chunk_notifications, chunk_bytes = chunk_by_chunk(path)
    say(
        f"(d) replay on the wire: {notifications} notifications, {wire_bytes:,} bytes; chunk by chunk: {chunk_notifications:,} notifications, {chunk_bytes:,} bytes ({chunk_bytes / wire_bytes:.1f}x more)"
    )
    for problem in problems:
        say(f"FAILED: {problem}")

    result = {
        "benchmark": "load",
        "history": args.history,
        "turns": TURNS if args.history == "loop" else messages // 2,
        "messages": messages,
        "chunks": chunks,
        "log_bytes": log_bytes,
        "log_records": records,
        "log_rows": rows,
        "rounds": args.rounds,
        "acp_server_load_s": round(ours_s, 4),
        "acp_server_rounds_s": [round(r["seconds"], 4) for r in ours],
        "acp_server_last_update_s": round(ours_last_s, 4),
        "acp_server_last_update_rounds_s": [round(r["last_update_s"], 4) for r in ours],
        "goal_last_update_s": GOAL_LAST_UPDATE_S,
        "acp_server_first_load_last_update_s": round(first_last_s, 4),
        "sdk_last_update_s": round(sdk_last_s, 4),
        "acp_server_spawn_to_last_update_s": round(ours_spawn_s, 4),
        "sdk_spawn_to_last_update_s": round(sdk_spawn_s, 4),
        "replay_fixture_bytes": fixture_bytes,
        "acp_server_replay_spawn_to_last_update_s": round(replay_spawn_s, 4),
        "replay_ratio_spawn_to_last_update": round(replay_spawn_s / ours_spawn_s, 2),
        "sdk_load_s": round(sdk_s, 4),
        "sdk_rounds_s": [round(r["seconds"], 4) for r in sdk],
        "sdk_ratio": round(sdk_s / ours_s, 2),
        "goal_sdk_ratio": GOAL_SDK_RATIO,
        "notifications": notifications,
        "sdk_notifications": sdk[0]["notifications"],
        "replay_wire_bytes": wire_bytes,
        "chunk_by_chunk_notifications": chunk_notifications,
        "chunk_by_chunk_wire_bytes": chunk_bytes,
        "bytes_ratio": round(chunk_bytes / wire_bytes, 1),
        "decode_every_event_s": round(decode_s, 4),
        "rows_packed_s": round(packed_s, 4),
        "decode_ratio": round(decode_s / packed_s, 2),
        "goal_decode_ratio": GOAL_DECODE_RATIO,
        "continue_session_and_project_s": round(server_s, 4),
        "decode_vs_continue_ratio": round(decode_s / server_s, 2),
        "goals_met": {
            "sdk_ratio": sdk_s / ours_s >= GOAL_SDK_RATIO,
            "last_update": ours_last_s < GOAL_LAST_UPDATE_S,
            "decode_ratio": decode_s / packed_s >= GOAL_DECODE_RATIO,
        },
        **compared,
        "ok": not problems,
        "python": platform.python_version(),
    }
    print("LOAD_PERF_RESULT " + json.dumps(result, separators=(",", ":")))
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
