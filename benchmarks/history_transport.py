"""History transport: what `session.page` costs for a session shaped like the seed sample.

Reproduces the measurements table of the packed-history-transport decision note (seed 001) on
synthetic content, and times both sides of the transport.

The session (`benchmarks/codec.py`'s `build_session`, fixed seed): 416,176 text-delta events in
116 runs, one run per turn; each turn is turn/start, user/message, step/start, block-start, the
deltas, block-end, finish, assistant/message (with its chunks' sourceRange), step/end,
turn/end: 417,220 logical events. It is written to a real log (`session.jsonl`) with the
project's `LogWriter` in the flush batches SPEC 2.4 prescribes to the loop: one before each model
request (after step/start), one whenever 100 ms of stream time has passed since the last (the
recorder's flusher), one after each step and one at each turn end (flushed, not fsynced: the
layout is the same). Flushes split the delta runs, so the file holds some 50,000 short rows, as
a live-written log does; what a page costs on the host grows with the stored rows it covers.

Sizes, each as a `{"records": [...], "hasMore": false}` result, compact JSON, then gzip (level 6)
and Brotli (quality `--brotli-quality`, default 9; skipped with a note when the optional `brotli`
package is missing):
- raw: one `{event}` record per logical event;
- projection: the "completed-step projection" candidate the note rejected: the chunks of every
  completed step (one with a `step/end`) dropped, everything else as `{event}` records. Every
  step of this session completes, so it drops every chunk; the note's sample had an open tail
  step whose 228k tokens the projection kept, so its projection was far larger than this one;
- packed: the real `session.page` result for the whole history (`{event}` / `{chunks}` records).

Times (median and minimum of `--repeats` runs, wall clock (`time.perf_counter`) and this
thread's CPU time (`time.thread_time`, less disturbed by other load on the machine); the log file
is in the OS page cache):
- host, cold whole history: `LogIndex.build` + `.page` + `to_history_records` + msgspec encode
  of the result (what the server does for a session it has not indexed yet);
- host, warm whole history: `.page` + wrap + encode on an index already built;
- host, cold newest page: build + page of the newest 50 messages + wrap + encode;
- client: msgspec JSON parse of the whole-history result, then `expand_history_records`
  (validation included) into exact events;
- server process: the real `acp-server serve` over stdio, from writing a `session.page` request
  to reading its whole response line: the cold newest-50 page (the first request for the session
  in each of `--processes` fresh processes), then the same page warm, and the whole history cold
  (another process); beside each, the CPU time the server's threads used meanwhile (Linux
  `/proc/PID/task/*/schedstat`). A fresh process pays for first-touching its memory too.

Peak memory is measured with `tracemalloc` in this process (Python-heap allocations made by the
measured call, on top of what was alive before it; the OS page cache and the interpreter are not
counted), in runs separate from the timed ones because tracing slows allocation.

Goals (issue 6): packed JSON <= 12% of raw; host cold newest-50 page < 50 ms; whole-history
client decode + expand < 300 ms; newest-page peak memory < 2x the log's size on disk. `goals`
judges the in-process medians (wall clock, and CPU beside it).

Run from the repository root: `python benchmarks/history_transport.py [--repeats N]`.
Human-readable lines go to stderr; stdout gets exactly one line,
`HISTORY_TRANSPORT_PERF_RESULT {json}`.
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import msgspec  # noqa: E402
from codec import SEED, build_session  # noqa: E402

from acp_server.core.chunk_rows import ROW_CLASSES  # noqa: E402
from acp_server.core.events import (  # noqa: E402
    AssistantChunk,
    SessionEvent,
    StepEnd,
    StepStart,
    TurnEnd,
    UserMessageEvent,
)
from acp_server.core.header import SESSION_FORMAT_VERSION, SessionHeader  # noqa: E402
from acp_server.core.history import (  # noqa: E402
    EventRecord,
    PageResult,
    expand_history_records,
    to_history_records,
)
from acp_server.core.stream import TextDelta  # noqa: E402
from acp_server.storage.jsonl.index import LogIndex  # noqa: E402
from acp_server.storage.jsonl.sessions import SessionStore  # noqa: E402

try:
    import brotli
except ImportError:  # optional: `pip install brotli` to measure it
    brotli = None

SESSION_ID = "history-bench"
FLUSH_INTERVAL_MS = 100
NEWEST_MESSAGES = 50
WHOLE = 2**31
"""`maxMessages` large enough for the whole history."""

GOALS = {
    "packedToRawJson": 0.12,
    "hostColdNewestPageMs": 50.0,
    "clientWholeDecodeExpandMs": 300.0,
    "newestPagePeakToLogSize": 2.0,
}

T = TypeVar("T")
_encoder = msgspec.json.Encoder()


def log(line: str = "") -> None:
    print(line, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# The log on disk.


def flush_batches(events: list[SessionEvent]) -> Iterator[list[SessionEvent]]:
    """The events cut where the loop flushes (SPEC 2.4)."""
    batch: list[SessionEvent] = []
    last_flush = events[0].time if events else 0
    for event in events:
        batch.append(event)
        kind = type(event)
        due = (
            kind is StepStart  # before the model request
            or kind is StepEnd
            or kind is TurnEnd
            or (kind is AssistantChunk and event.time - last_flush >= FLUSH_INTERVAL_MS)
        )
        if due:
            yield batch
            batch = []
            last_flush = event.time
    if batch:
        yield batch


def write_log(root: Path, events: list[SessionEvent]) -> tuple[Path, int]:
    """The session written as the loop would; returns its path and the number of flushes."""
    store = SessionStore(root)
    writer = store.create(
        SessionHeader(
            version=SESSION_FORMAT_VERSION, id=SESSION_ID, created_at=events[0].time, cwd="/bench"
        )
    )
    flushes = 0
    for batch in flush_batches(events):
        writer.append(batch)
        writer.flush()
        flushes += 1
    writer.close()
    return store.log_path(SESSION_ID), flushes


# ---------------------------------------------------------------------------------------------
# The representations.


def completed_step_projection(events: list[SessionEvent]) -> list[SessionEvent]:
    """Every event but the chunks of steps that reached `step/end`."""
    completed = {(e.data.turn, e.data.step) for e in events if type(e) is StepEnd}
    return [
        e
        for e in events
        if not (type(e) is AssistantChunk and (e.data.turn, e.data.step) in completed)
    ]


def as_result(records: list[Any], has_more: bool = False) -> bytes:
    return _encoder.encode(PageResult(records, has_more))


def sizes(payload: bytes, records: int, brotli_quality: int) -> dict[str, Any]:
    entry: dict[str, Any] = {"records": records, "jsonBytes": len(payload)}
    entry["gzipBytes"] = len(gzip.compress(payload, compresslevel=6, mtime=0))
    entry["brotliBytes"] = len(brotli.compress(payload, quality=brotli_quality)) if brotli else None
    return entry


# ---------------------------------------------------------------------------------------------
# The measured operations (the server's and the client's own functions).


def host_page(index: LogIndex, end: int, max_messages: int) -> bytes:
    cut, records = index.page(end, max_messages)
    return as_result(to_history_records(records), cut.has_more)


def host_cold(path: Path, max_messages: int) -> bytes:
    index = LogIndex.build(path)
    return host_page(index, index.length, max_messages)


def client_expand(response: bytes) -> list[SessionEvent]:
    result = msgspec.json.decode(response)
    return expand_history_records(result["records"])


class Timing:
    """Wall-clock and CPU seconds (of this thread) of repeated calls."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def summary(self) -> dict[str, float]:
        return {
            "ms": ms(self.wall),
            "minMs": round(min(self.wall) * 1000, 2),
            "cpuMs": ms(self.cpu),
            "minCpuMs": round(min(self.cpu) * 1000, 2),
        }


def timed(repeats: int, work: Callable[[], T]) -> tuple[Timing, T]:
    """`repeats` calls of `work`, timed, and the last call's result."""
    timing = Timing()
    result: Any = None
    for _ in range(repeats):
        result = None
        gc.collect()
        start, start_cpu = time.perf_counter(), time.thread_time()
        result = work()
        timing.cpu.append(time.thread_time() - start_cpu)
        timing.wall.append(time.perf_counter() - start)
    return timing, result


def ms(times: list[float]) -> float:
    """The median, in milliseconds."""
    return round(statistics.median(times) * 1000, 2)


def peak_bytes(work: Callable[[], Any]) -> int:
    """The peak of Python-heap allocations made while `work()` runs (its result included)."""
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        result = work()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    del result
    return peak


# ---------------------------------------------------------------------------------------------
# Through the real server.


class Server:
    """`python -m acp_server serve` over stdio, driven one request at a time."""

    def __init__(self, root: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "acp_server", "serve", "--sessions-dir", str(root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(HERE.parent)},
        )
        self.next_id = 0
        self.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})

    def request(self, method: str, params: Any) -> tuple[float, float | None, bytes]:
        """Seconds from writing the request to reading the whole response line, the server's
        CPU seconds meanwhile (None where /proc cannot tell), and the line."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.next_id += 1
        line = (
            json.dumps(
                {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
            ).encode()
            + b"\n"
        )
        cpu_before = self.cpu_ns()
        start = time.perf_counter()
        self.process.stdin.write(line)
        self.process.stdin.flush()
        response = self.process.stdout.readline()
        elapsed = time.perf_counter() - start
        cpu_after = self.cpu_ns()
        frame = msgspec.json.decode(response)
        if frame.get("id") != self.next_id or "result" not in frame:
            raise SystemExit(f"{method} failed: {response[:300]!r}")
        cpu = (
            (cpu_after - cpu_before) / 1e9
            if cpu_before is not None and cpu_after is not None
            else None
        )
        return elapsed, cpu, response

    def cpu_ns(self) -> int | None:
        """CPU nanoseconds the server's threads have run (Linux `schedstat`), or None."""
        try:
            tasks = Path(f"/proc/{self.process.pid}/task")
            return sum(int((task / "schedstat").read_text().split()[0]) for task in tasks.iterdir())
        except (OSError, ValueError, IndexError):
            return None

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


def through_server(
    root: Path, last_seq: int, newest_records: bytes, processes: int
) -> dict[str, Any]:
    """The newest page cold (the first request of each of `processes` fresh servers), then
    warm (5 more in the last one); the whole history cold in one more process."""
    params = {"address": {"kind": "session", "sessionId": SESSION_ID}, "throughSeq": last_seq}
    newest = {**params, "maxMessages": NEWEST_MESSAGES}
    cold, cold_cpu, warm, warm_cpu = [], [], [], []
    for _ in range(processes):
        server = Server(root)
        try:
            wall, cpu, response = server.request("session.page", newest)
            cold.append(wall)
            cold_cpu.append(cpu)
            if _encoder.encode(msgspec.json.decode(response)["result"]) != newest_records:
                raise SystemExit("the server's newest page differs from the in-process one")
        finally:
            server.close()
    server = Server(root)
    try:
        server.request("session.page", newest)
        for _ in range(5):
            wall, cpu, _ = server.request("session.page", newest)
            warm.append(wall)
            warm_cpu.append(cpu)
    finally:
        server.close()
    server = Server(root)
    try:
        whole_s, whole_cpu, whole = server.request("session.page", {**params, "maxMessages": WHOLE})
    finally:
        server.close()

    def cpu_ms(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return ms(known) if known else None

    return {
        "coldNewestPageMs": ms(cold),
        "coldNewestPageMinMs": round(min(cold) * 1000, 2),
        "coldNewestPageServerCpuMs": cpu_ms(cold_cpu),
        "coldNewestPageRuns": processes,
        "warmNewestPageMs": ms(warm),
        "warmNewestPageServerCpuMs": cpu_ms(warm_cpu),
        "coldWholeHistoryMs": round(whole_s * 1000, 2),
        "coldWholeHistoryServerCpuMs": cpu_ms([whole_cpu]),
        "wholeHistoryResponseBytes": len(whole),
    }


# ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per figure (default 5)")
    parser.add_argument("--seed", type=int, default=SEED, help=f"random seed (default {SEED})")
    parser.add_argument(
        "--brotli-quality", type=int, default=9, help="Brotli quality 0-11 (default 9)"
    )
    parser.add_argument(
        "--processes", type=int, default=3, help="fresh servers for the cold page (default 3)"
    )
    parser.add_argument("--keep", type=Path, help="write the log under this directory and keep it")
    args = parser.parse_args(argv)
    repeats: int = args.repeats
    started = time.perf_counter()
    if brotli is None:
        log(
            "note: the optional `brotli` package is not installed; Brotli sizes are reported as null"
        )

    events = build_session(args.seed)
    deltas = sum(1 for e in events if type(e) is AssistantChunk and type(e.data.chunk) is TextDelta)
    log(
        f"built {len(events):,} events ({deltas:,} text deltas) in {time.perf_counter() - started:.1f} s"
    )

    with tempfile.TemporaryDirectory() as tmp:
        root = (args.keep or Path(tmp)) / "sessions"
        path, flushes = write_log(root, events)
        log_size = path.stat().st_size
        stored_records = path.read_bytes().count(b"\n") - 1
        index = LogIndex.build(path)
        log(f"log: {log_size:,} bytes, {stored_records:,} stored records from {flushes:,} flushes")

        # -- sizes ---------------------------------------------------------------------------
        raw = as_result([EventRecord(e) for e in events])
        projected = completed_step_projection(events)
        projection = as_result([EventRecord(e) for e in projected])
        _, packed_records = index.page(index.length, WHOLE)
        packed = as_result(to_history_records(packed_records))
        rows = sum(1 for r in packed_records if type(r) in ROW_CLASSES)
        size = {
            "raw": sizes(raw, len(events), args.brotli_quality),
            "projection": sizes(projection, len(projected), args.brotli_quality),
            "packed": {**sizes(packed, len(packed_records), args.brotli_quality), "rows": rows},
        }
        del raw, projection, projected, packed_records
        log(f"sizes done at {time.perf_counter() - started:.1f} s")

        # -- times ---------------------------------------------------------------------------
        cold_whole, whole = timed(repeats, lambda: host_cold(path, WHOLE))
        if whole != packed:
            raise SystemExit("the cold whole-history page differs from the first one")
        warm_whole, _ = timed(repeats, lambda: host_page(index, index.length, WHOLE))
        cold_newest, newest = timed(repeats, lambda: host_cold(path, NEWEST_MESSAGES))
        build_only, _ = timed(repeats, lambda: LogIndex.build(path))
        warm_newest, _ = timed(repeats, lambda: host_page(index, index.length, NEWEST_MESSAGES))
        client, expanded = timed(repeats, lambda: client_expand(packed))
        if expanded != events:
            raise SystemExit("the client's expansion did not give back the events")
        del expanded, whole
        log(f"timings done at {time.perf_counter() - started:.1f} s")

        # -- memory --------------------------------------------------------------------------
        host_whole_peak = peak_bytes(lambda: host_cold(path, WHOLE))
        client_peak = peak_bytes(lambda: client_expand(packed))
        newest_peak = peak_bytes(lambda: host_cold(path, NEWEST_MESSAGES))
        log(f"memory done at {time.perf_counter() - started:.1f} s")

        server = through_server(
            root, index.last_seq, _encoder.encode(msgspec.json.decode(newest)), args.processes
        )
        log(f"server done at {time.perf_counter() - started:.1f} s")

    packed_to_raw = size["packed"]["jsonBytes"] / size["raw"]["jsonBytes"]
    figures = {
        "packedToRawJson": round(packed_to_raw, 4),
        "hostColdNewestPageMs": ms(cold_newest.wall),
        "clientWholeDecodeExpandMs": ms(client.wall),
        "newestPagePeakToLogSize": round(newest_peak / log_size, 3),
    }
    cpu_figures = {
        "hostColdNewestPageMs": ms(cold_newest.cpu),
        "clientWholeDecodeExpandMs": ms(client.cpu),
    }
    result = {
        "events": len(events),
        "deltaEvents": deltas,
        "turns": sum(1 for e in events if type(e) is UserMessageEvent),
        "log": {"bytes": log_size, "storedRecords": stored_records, "flushes": flushes},
        "sizes": size,
        "packedToRaw": {
            "json": round(packed_to_raw, 4),
            "gzip": round(size["packed"]["gzipBytes"] / size["raw"]["gzipBytes"], 4),
            "brotli": round(size["packed"]["brotliBytes"] / size["raw"]["brotliBytes"], 4)
            if brotli
            else None,
        },
        "host": {
            "coldWholeHistory": cold_whole.summary(),
            "warmWholeHistory": warm_whole.summary(),
            "coldNewestPage": cold_newest.summary(),
            "indexBuild": build_only.summary(),
            "warmNewestPage": warm_newest.summary(),
            "newestPageBytes": len(newest),
        },
        "client": {"wholeDecodeExpand": client.summary()},
        "server": server,
        "memory": {
            "method": "tracemalloc peak (Python heap allocated by the call, in-process)",
            "hostColdWholeHistoryPeakBytes": host_whole_peak,
            "clientWholeDecodeExpandPeakBytes": client_peak,
            "hostColdNewestPagePeakBytes": newest_peak,
            "logBytes": log_size,
        },
        "goals": {
            name: {
                "goal": goal,
                "value": figures[name],
                "met": figures[name] <= goal if name == "packedToRawJson" else figures[name] < goal,
                **(
                    {"cpuValue": cpu_figures[name], "metOnCpu": cpu_figures[name] < goal}
                    if name in cpu_figures
                    else {}
                ),
            }
            for name, goal in GOALS.items()
        },
        "timing": f"median (and min) of {repeats} runs: wall clock (perf_counter) and this thread's CPU (thread_time)",
        "loadAverage": os.getloadavg()[0],
        "brotliQuality": args.brotli_quality if brotli else None,
        "seed": args.seed,
        "python": platform.python_version(),
        "msgspec": msgspec.__version__,
    }

    log()
    log(f"{'representation':<14}{'records':>10}{'JSON':>14}{'gzip':>12}{'brotli':>12}")
    for name, entry in size.items():
        brotli_bytes = f"{entry['brotliBytes']:,}" if entry["brotliBytes"] is not None else "-"
        log(
            f"{name:<14}{entry['records']:>10,}{entry['jsonBytes']:>14,}{entry['gzipBytes']:>12,}{brotli_bytes:>12}"
        )
    log(f"packed/raw JSON {packed_to_raw:.1%}")

    def both(timing: Timing) -> str:
        return f"{ms(timing.wall)} ms (cpu {ms(timing.cpu)} ms)"

    log(f"host: whole history cold {both(cold_whole)}, warm {both(warm_whole)}")
    log(
        f"host: newest {NEWEST_MESSAGES} messages cold {both(cold_newest)} (index build {both(build_only)}), "
        f"warm {both(warm_newest)}"
    )
    log(f"client: whole history decode + expand {both(client)}")
    log(
        f"server process: newest {NEWEST_MESSAGES} cold {server['coldNewestPageMs']} ms (server cpu "
        f"{server['coldNewestPageServerCpuMs']} ms), warm {server['warmNewestPageMs']} ms; "
        f"whole history cold {server['coldWholeHistoryMs']} ms"
    )
    log(
        f"peak memory (tracemalloc): host whole cold {host_whole_peak / 2**20:.1f} MiB, client "
        f"{client_peak / 2**20:.1f} MiB, newest page cold {newest_peak / 2**20:.1f} MiB "
        f"= {newest_peak / log_size:.2f}x the log ({log_size / 2**20:.1f} MiB)"
    )
    for name, goal in result["goals"].items():
        cpu = (
            f" (cpu {goal['cpuValue']}: {'met' if goal['metOnCpu'] else 'MISSED'})"
            if "cpuValue" in goal
            else ""
        )
        log(
            f"goal {name}: {goal['value']} vs {goal['goal']}: {'met' if goal['met'] else 'MISSED'}{cpu}"
        )
    log(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    log(f"total run time {time.perf_counter() - started:.1f} s")
    print("HISTORY_TRANSPORT_PERF_RESULT " + json.dumps(result, separators=(",", ":")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
