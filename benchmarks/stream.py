"""End-to-end streaming throughput: replayed model chunks through the loop, the log and stdio.

Generates (in a temporary directory, from a fixed seed) a replay fixture with ONE model call:
a text block of `--chunks` text-delta chunks (fragments of 1 to 8 characters of prose-like
text), then `finish: stop`. Spawns the real server on it

    python -m acp_server serve --sessions-dir TMP/sessions --replay TMP/fixture

and plays a client over its stdio: `initialize`, `session/new`, then `session/prompt`, reading
every frame the server writes until the prompt's response. Each line is parsed as JSON (a real
client parses what it gets), the `agent_message_chunk` notifications are counted (there must be
exactly `--chunks`) and their text is checked against the script. The measured time runs from
writing the prompt to reading its response. Afterwards the session log on disk is read back
with `acp_server.storage.jsonl.log.read_log` and must hold every chunk.

The path measured, per chunk: `ReplayProvider.stream` -> `Turn._stream_step` (the recorder's
append to the in-memory log and the writer's batch, the assembler) -> the `session/update`
notification (`Connection.notify` -> `FrameWriter`) -> the pipe -> the client; beside it the
recorder's 100 ms flusher packs each batch into chunk rows and writes them (SPEC 2.4).

Each of `--rounds` runs (default 3) spawns a new server; the reported figure is the median run.
Besides the wall time, each run notes the server's CPU time (start to exit, from `wait4`) and
the client's CPU time during the prompt: which side the time goes to.

Profiling (one run; profiling slows it, so its chunks/s are not the figure to report):
- `--profile-server FILE` runs the server under `python -m cProfile -o FILE` (main thread only:
  the frame writer's worker-thread writes are not in it), and prints its top entries;
- `--py-spy FILE` samples the server with py-spy (when installed; attached by pid, so that its
  own output stays off the protocol), collapsed stacks into FILE, and prints the top frames;
- `--profile-client FILE` profiles the benchmark's own read loop with cProfile.

Run from the repository root: `python benchmarks/stream.py [--chunks N] [--rounds R]`
(`--client-json msgspec` for a faster client than the standard library's `json`).
Human-readable lines go to stderr; stdout gets exactly one line, `STREAM_PERF_RESULT {json}`.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from acp_server.core.chunk_rows import ROW_CLASSES, TextChunks  # noqa: E402
from acp_server.core.content import TextContent  # noqa: E402
from acp_server.core.events import (  # noqa: E402
    AssistantChunk,
    AssistantChunkData,
    SessionEvent,
    StepData,
    StepStart,
    TurnStart,
    TurnStartData,
    UserMessage,
    UserMessageData,
    UserMessageEvent,
)
from acp_server.core.header import SESSION_FORMAT_VERSION, SessionHeader  # noqa: E402
from acp_server.core.replay_script import render_fixture  # noqa: E402
from acp_server.core.stream import BlockEnd, BlockStart, Finish, TextDelta  # noqa: E402
from acp_server.storage.jsonl.log import read_log  # noqa: E402

DEFAULT_CHUNKS = 200_000
SEED = 20260815
READ_SIZE = 1 << 20
TIMEOUT_S = 300.0

# fmt: off
WORDS = ["the", "a", "of", "to", "and", "in", "is", "that", "it", "for", "as", "with", "on", "be", "this", "by", "are", "from", "or", "an", "which", "we", "can", "not", "session", "event", "log", "chunk", "row", "packed", "decode", "stream", "token", "provider", "model", "request", "response", "message", "assistant", "user", "tool", "call", "result", "file", "path", "line", "error", "value", "state", "order", "history", "because", "however", "therefore", "although", "while", "when", "where", "after", "before", "during", "since", "until", "function", "module", "package", "server", "client", "protocol", "editor", "cursor", "buffer", "window", "terminal", "über", "naïve", "café", "résumé", "façade", "jalapeño", "São", "Paulo", "Zürich", "Kraków"]
# fmt: on
PUNCTUATION = (",", ".", ";", ":", "?", "!")


def say(line: str = "") -> None:
    print(line, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# The fixture.


def prose(rng: random.Random, length: int) -> str:
    """At least `length` characters of prose-like text."""
    parts: list[str] = []
    size = 0
    capitalize = True
    while size <= length:
        word = rng.choice(WORDS)
        if capitalize:
            word, capitalize = word.capitalize(), False
        piece = " " + word
        roll = rng.random()
        if roll < 0.08:
            piece += rng.choice(PUNCTUATION)
            capitalize = piece[-1] in ".?!"
        elif roll < 0.09:
            piece += "\n\n"
            capitalize = True
        elif roll < 0.095:
            piece += ' `code("x")`'
        parts.append(piece)
        size += len(piece)
    return "".join(parts)[1:]


def fragments(seed: int, count: int) -> list[str]:
    """`count` consecutive fragments of 1 to 8 characters of one prose text."""
    rng = random.Random(seed)
    corpus = prose(rng, count * 8)
    out: list[str] = []
    cursor = 0
    for _ in range(count):
        size = rng.randint(1, 8)
        out.append(corpus[cursor : cursor + size])
        cursor += size
    return out


def write_fixture(directory: Path, texts: list[str]) -> Path:
    """A projected fixture with one model call streaming `texts`, then `finish: stop`."""
    header = SessionHeader(SESSION_FORMAT_VERSION, "stream-bench", 0, "/workspace")
    events: list[SessionEvent] = []

    def add(kind: type, data: Any) -> None:
        events.append(kind(len(events), 0, data))

    add(TurnStart, TurnStartData(0))
    add(
        UserMessageEvent,
        UserMessageData(0, UserMessage("user-0", [TextContent("Write a long essay.")])),
    )
    add(StepStart, StepData(0, 0))
    add(AssistantChunk, AssistantChunkData(0, 0, BlockStart(0, "text")))
    for text in texts:
        add(AssistantChunk, AssistantChunkData(0, 0, TextDelta(0, text)))
    add(AssistantChunk, AssistantChunkData(0, 0, BlockEnd(0)))
    add(AssistantChunk, AssistantChunkData(0, 0, Finish("stop")))
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "session.jsonl"
    path.write_bytes(render_fixture(header, events))
    return path


# ---------------------------------------------------------------------------------------------
# The client.


class Client:
    """The client end of the server's stdio: writes request lines, reads and parses frames."""

    def __init__(
        self, process: subprocess.Popen[bytes], loads: Callable[[bytes], Any] = json.loads
    ) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self.loads = loads
        self.stdin = process.stdin
        self.stdout_fd = process.stdout.fileno()
        self.pending = b""
        self.next_id = 0

    def send(self, method: str, params: Any) -> int:
        self.next_id += 1
        line = json.dumps(
            {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        )
        self.stdin.write(line.encode() + b"\n")
        self.stdin.flush()
        return self.next_id

    def until_response(self, request_id: int, on_frame: Any = None) -> dict[str, Any]:
        """Read and parse frames until the response to `request_id`; `on_frame` sees the rest."""
        loads, read, fd = self.loads, os.read, self.stdout_fd
        pending = self.pending
        while True:
            chunk = read(fd, READ_SIZE)
            if not chunk:
                raise RuntimeError("the server closed its output before answering")
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            for index, line in enumerate(lines):
                frame = loads(line)
                if "method" not in frame and frame.get("id") == request_id:
                    rest = lines[index + 1 :]
                    self.pending = b"\n".join([*rest, pending]) if rest else pending
                    return frame
                if on_frame is not None:
                    on_frame(frame)

    def call(self, method: str, params: Any) -> Any:
        frame = self.until_response(self.send(method, params))
        if "result" not in frame:
            raise RuntimeError(f"{method} failed: {frame}")
        return frame["result"]


class ChunkCounter:
    """Counts the prompt's `agent_message_chunk` notifications and keeps their text."""

    def __init__(self) -> None:
        self.chunks = 0
        self.other = 0
        self.texts: list[str] = []

    def __call__(self, frame: dict[str, Any]) -> None:
        if frame.get("method") == "session/update":
            update = frame["params"]["update"]
            if update["sessionUpdate"] == "agent_message_chunk":
                self.chunks += 1
                self.texts.append(update["content"]["text"])
                return
        self.other += 1


# ---------------------------------------------------------------------------------------------
# The run.


def top_entries(path: str, limit: int, sort: str) -> str:
    out = io.StringIO()
    stats = pstats.Stats(path, stream=out)
    stats.strip_dirs().sort_stats(sort).print_stats(limit)
    return out.getvalue()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--chunks",
        type=int,
        default=DEFAULT_CHUNKS,
        help=f"text-delta chunks (default {DEFAULT_CHUNKS})",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="runs, each with a new server; the median counts (default 3)",
    )
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument(
        "--client-json",
        choices=("json", "msgspec"),
        default="json",
        help="the client's JSON parser: the standard library's (default) or msgspec's (a faster client)",
    )
    parser.add_argument(
        "--profile-server", metavar="FILE", help="run the server under cProfile, stats to FILE"
    )
    parser.add_argument(
        "--profile-client", metavar="FILE", help="profile the client's read loop, stats to FILE"
    )
    parser.add_argument(
        "--py-spy",
        metavar="FILE",
        help="sample the server with py-spy (if installed) into FILE, as collapsed stacks (--format raw)",
    )
    parser.add_argument("--top", type=int, default=25, help="profile entries to print (default 25)")
    parser.add_argument(
        "--keep", action="store_true", help="keep the temporary directory (its path is printed)"
    )
    args = parser.parse_args()
    if args.chunks < 3:
        parser.error("--chunks must be at least 3")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    profiled = bool(args.profile_server or args.profile_client or args.py_spy)
    if profiled:
        args.rounds = 1

    root = Path(tempfile.mkdtemp(prefix="acp-stream-bench-"))
    try:
        texts = fragments(args.seed, args.chunks)
        fixture = write_fixture(root / "fixture", texts)
        say(
            f"fixture: {args.chunks} text-delta chunks, {sum(map(len, texts))} characters, {fixture.stat().st_size} bytes"
        )
        rounds = [run_once(args, root / f"round-{n}", fixture, texts) for n in range(args.rounds)]
    finally:
        if args.keep:
            say(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)

    ok = all(r["ok"] for r in rounds)
    median = sorted(rounds, key=lambda r: r["seconds"])[len(rounds) // 2]
    say(
        f"median of {len(rounds)}: {median['seconds']:.3f} s, {median['chunks_per_second']:,} chunks/s"
    )
    result = {
        "chunks": args.chunks,
        "seconds": median["seconds"],
        "chunks_per_second": median["chunks_per_second"],
        "rounds_chunks_per_second": [r["chunks_per_second"] for r in rounds],
        "server_cpu_seconds": median["server_cpu_seconds"],
        "client_cpu_seconds": median["client_cpu_seconds"],
        "log_bytes": median["log_bytes"],
        "log_records": median["log_records"],
        "log_rows": median["log_rows"],
        "client_json": args.client_json,
        "profiled": profiled,
        "ok": ok,
        "python": platform.python_version(),
    }
    print("STREAM_PERF_RESULT " + json.dumps(result, separators=(",", ":")))
    return 0 if ok else 1


def run_once(
    args: argparse.Namespace, root: Path, fixture: Path, texts: list[str]
) -> dict[str, Any]:
    """One server, one prompt streaming every chunk; the measurements and the checks."""
    sessions = root / "sessions"
    root.mkdir(parents=True)
    server = [sys.executable]
    if args.profile_server:
        server += ["-m", "cProfile", "-o", str(Path(args.profile_server).resolve())]
    server += [
        "-m",
        "acp_server",
        "serve",
        "--sessions-dir",
        str(sessions),
        "--replay",
        str(fixture.parent),
    ]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE.parent), env.get("PYTHONPATH", "")]))
    stderr_path = root / "server.stderr"
    with open(stderr_path, "wb") as stderr:
        # stderr to a file, not a pipe nobody reads: a chatty server would otherwise block.
        process = subprocess.Popen(
            server, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env, bufsize=0
        )
    spy = None
    if args.py_spy:
        # Attached by pid, not as a wrapper: py-spy's own messages must stay off the protocol.
        command = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        output = str(Path(args.py_spy).resolve())
        spy = subprocess.Popen(
            [
                command,
                "record",
                "--nonblocking",
                "--rate",
                "250",
                "--format",
                "raw",
                "--output",
                output,
                "--pid",
                str(process.pid),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)  # let it attach
    client = Client(process, msgspec.json.decode if args.client_json == "msgspec" else json.loads)
    counter = ChunkCounter()
    try:
        client.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        session_id = client.call("session/new", {"cwd": str(root), "mcpServers": []})["sessionId"]
        prompt = {
            "sessionId": session_id,
            "prompt": [{"type": "text", "text": "Write a long essay."}],
        }
        profiler = cProfile.Profile() if args.profile_client else None
        started, client_cpu = time.perf_counter(), time.process_time()
        if profiler is not None:
            profiler.enable()
        response = client.until_response(client.send("session/prompt", prompt), counter)
        if profiler is not None:
            profiler.disable()
        seconds = time.perf_counter() - started
        client_cpu = time.process_time() - client_cpu
        client.stdin.close()
        _, wait_status, usage = os.wait4(process.pid, 0)  # the server's CPU time, start to exit
        process.returncode = status = os.waitstatus_to_exitcode(wait_status)
        server_cpu = usage.ru_utime + usage.ru_stime
        if spy is not None:
            spy.wait(timeout=TIMEOUT_S)
    except BaseException:
        process.kill()
        process.wait()
        say(stderr_path.read_text(errors="replace")[-4000:])
        raise
    finally:
        for stream in (process.stdin, process.stdout):
            if stream is not None and not stream.closed:
                stream.close()

    problems: list[str] = []
    if response.get("result") != {"stopReason": "end_turn"}:
        problems.append(f"unexpected prompt response: {response}")
    if counter.chunks != len(texts):
        problems.append(
            f"{counter.chunks} agent_message_chunk notifications, expected {len(texts)}"
        )
    if counter.texts != texts:
        problems.append("the streamed text differs from the script")
    if status != 0:
        problems.append(f"server exit status {status}")

    log_path = sessions / session_id / "session.jsonl"
    contents = read_log(log_path)
    logged: list[str] = []
    for record in contents.records:
        if type(record) is TextChunks:
            logged.extend(record.data.texts)
        elif type(record) is AssistantChunk and type(record.data.chunk) is TextDelta:
            logged.append(record.data.chunk.text)
    if logged != texts:
        problems.append(
            f"the log holds {len(logged)} text chunks, expected {len(texts)} (or their text differs)"
        )
    rows = sum(1 for r in contents.records if type(r) in ROW_CLASSES)
    log_bytes = log_path.stat().st_size

    rate = len(texts) / seconds
    say(
        f"prompt -> response: {seconds:.3f} s for {counter.chunks} chunks: {rate:,.0f} chunks/s "
        f"(server CPU {server_cpu:.2f} s from start to exit, client CPU {client_cpu:.2f} s); "
        f"log: {log_bytes} bytes, {len(contents.records)} records ({rows} chunk rows), {len(logged)} text chunks; "
        f"other frames during the prompt: {counter.other}"
    )
    if args.profile_server:
        say(f"\nserver profile ({args.profile_server}), by own time:")
        say(top_entries(args.profile_server, args.top, "tottime"))
        say("server profile, by cumulative time:")
        say(top_entries(args.profile_server, args.top, "cumulative"))
    if profiler is not None:
        profiler.dump_stats(args.profile_client)
        say(f"\nclient profile ({args.profile_client}), by own time:")
        say(top_entries(args.profile_client, args.top, "tottime"))
    if args.py_spy:
        say(f"\nserver samples (py-spy, {args.py_spy}), by own time:")
        say(summarize_py_spy(args.py_spy, args.top))
    for problem in problems:
        say(f"FAILED: {problem}")
    return {
        "seconds": round(seconds, 4),
        "chunks_per_second": round(rate),
        "server_cpu_seconds": round(server_cpu, 3),
        "client_cpu_seconds": round(client_cpu, 3),
        "log_bytes": log_bytes,
        "log_records": len(contents.records),
        "log_rows": rows,
        "ok": not problems,
    }


def summarize_py_spy(path: str, limit: int) -> str:
    """py-spy's samples by function: own share (on top of the stack) and inclusive share (anywhere
    in it). They cover the server's whole life, start-up (the fixture's parse) included."""
    own: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    total = 0
    for line in Path(path).read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [re.sub(r":\d+\)$", ")", frame) for frame in stack.split(";")]
        n = int(count)
        total += n
        own[frames[-1]] = own.get(frames[-1], 0) + n
        for frame in set(frames):
            inclusive[frame] = inclusive.get(frame, 0) + n
    total = max(total, 1)
    lines = [f"{total} samples; own share:"]
    lines += [
        f"{100 * n / total:5.1f}%  {name}"
        for name, n in sorted(own.items(), key=lambda i: -i[1])[:limit]
    ]
    lines.append("inclusive share:")
    lines += [
        f"{100 * n / total:5.1f}%  {name}"
        for name, n in sorted(inclusive.items(), key=lambda i: -i[1])[:limit]
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
