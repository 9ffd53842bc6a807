"""Benchmark of the chunk-row codec (SPEC 2.1) on a session shaped like the seed sample.

The seed note measured a production tail page of 416,756 logical events holding 116 packed rows.
This script builds a synthetic session of the same shape from a fixed random seed: 416,176
text-delta events in 116 runs, one block per run, each run in its own turn:

    turn/start, user/message (the prompt), step/start, block-start, the deltas (1 to 8
    characters of prose-like text each), block-end, finish, assistant/message (the assembled
    text, with its chunks' sourceRange), step/end, turn/end

and measures, best of several repetitions (`time.perf_counter`):

- pack: `pack_chunk_runs` over the logical events (events/s);
- packed decode: `decode_record_json` + `decode_storage_record` per packed JSON line (events/s);
- raw decode (the baseline): `decode_event` per raw JSON line, one line per event (events/s);
- JSON bytes of the raw lines vs the packed lines (each line counted with its `\\n`).

Human-readable lines go to stderr; stdout gets exactly one line, `CODEC_PERF_RESULT {json}`.

Run from the repository root: `PYTHONPATH=. python benchmarks/codec.py [--repeats N]`.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import random
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec

from acp_server.core.chunk_rows import (
    ReasoningChunks,
    TextChunks,
    ToolCallChunks,
    decode_record_json,
    decode_storage_record,
    pack_chunk_runs,
)
from acp_server.core.content import TextContent
from acp_server.core.events import (
    AssistantChunk,
    AssistantChunkData,
    AssistantMessage,
    AssistantMessageData,
    AssistantMessageEvent,
    SessionEvent,
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
    decode_event,
    encode_event,
)
from acp_server.core.stream import AssistantText, BlockEnd, BlockStart, Finish, TextDelta

SEED = 20260815
DELTA_EVENTS = 416_176
RUNS = 116
START_TIME = 1_760_000_000_000

# fmt: off
WORDS = ["the", "a", "of", "to", "and", "in", "is", "that", "it", "for", "as", "with", "on", "be", "this", "by", "are", "from", "or", "an", "which", "we", "can", "not", "session", "event", "log", "chunk", "row", "packed", "decode", "stream", "token", "provider", "model", "request", "response", "message", "assistant", "user", "tool", "call", "result", "file", "path", "line", "error", "value", "state", "order", "history", "because", "however", "therefore", "although", "while", "when", "where", "after", "before", "during", "since", "until", "function", "module", "package", "server", "client", "protocol", "editor", "cursor", "buffer", "window", "terminal", "über", "naïve", "café", "résumé", "façade", "jalapeño", "São", "Paulo", "Zürich", "Kraków"]
# fmt: on
PUNCTUATION = (",", ".", ";", ":", "?", "!")
GAPS = (0, 0, 1, 2, 8, 12, 15, 20, 31, 45)
"""Milliseconds between consecutive deltas."""

T = TypeVar("T")


def log(line: str = "") -> None:
    print(line, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# The synthetic session.


def prose(rng: random.Random, length: int) -> str:
    """At least `length` characters of prose-like text: words, punctuation, paragraphs."""
    parts: list[str] = []
    size = 0
    capitalize = True
    while size <= length:  # one more: the leading space is dropped
        word = rng.choice(WORDS)
        if capitalize:
            word = word.capitalize()
            capitalize = False
        piece = " " + word
        roll = rng.random()
        if roll < 0.08:
            piece += rng.choice(PUNCTUATION)
            capitalize = piece[-1] in ".?!"
        elif roll < 0.09:
            piece += "\n\n"
            capitalize = True
        elif roll < 0.095:
            piece += " `code()`"
        parts.append(piece)
        size += len(piece)
    return "".join(parts)[1:]


def run_lengths(rng: random.Random) -> list[int]:
    """RUNS lengths summing exactly to DELTA_EVENTS, uneven as real answers are."""
    weights = [rng.lognormvariate(0.0, 0.6) for _ in range(RUNS)]
    scale = DELTA_EVENTS / sum(weights)
    lengths = [max(3, round(w * scale)) for w in weights]
    lengths[-1] += DELTA_EVENTS - sum(lengths)
    assert sum(lengths) == DELTA_EVENTS and min(lengths) >= 3
    return lengths


def build_session(seed: int) -> list[SessionEvent]:
    """The logical events of the seed-shaped session, on contiguous seqs from 0."""
    rng = random.Random(seed)
    corpus = prose(rng, DELTA_EVENTS * 8)
    cursor = 0
    events: list[SessionEvent] = []
    now = START_TIME

    def add(kind: type, data: Any, gap: int, **envelope: Any) -> None:
        nonlocal now
        now += gap
        events.append(kind(len(events), now, data, **envelope))

    for turn, length in enumerate(run_lengths(rng)):
        prompt = UserMessage(f"u{turn}", [TextContent(prose(rng, rng.randint(20, 200)))])
        add(TurnStart, TurnStartData(turn), 1000)
        add(UserMessageEvent, UserMessageData(turn, prompt), 0)
        add(StepStart, StepData(turn, 0), 1)
        first_chunk = len(events)
        add(AssistantChunk, AssistantChunkData(turn, 0, BlockStart(0, "text")), 400)
        fragments: list[str] = []
        for _ in range(length):
            size = rng.randint(1, 8)
            fragment = corpus[cursor : cursor + size]
            cursor += size
            fragments.append(fragment)
            add(
                AssistantChunk,
                AssistantChunkData(turn, 0, TextDelta(0, fragment)),
                rng.choice(GAPS),
            )
        add(AssistantChunk, AssistantChunkData(turn, 0, BlockEnd(0)), 1)
        add(AssistantChunk, AssistantChunkData(turn, 0, Finish("stop")), 0)
        answer = AssistantMessage(f"m{turn}", [AssistantText("".join(fragments))])
        source_range = (first_chunk, len(events) - 1)
        add(
            AssistantMessageEvent,
            AssistantMessageData(turn, 0, answer),
            1,
            source_range=source_range,
        )
        add(StepEnd, StepData(turn, 0), 0)
        add(TurnEnd, TurnEndData(turn, TurnEndReasonCompleted()), 0)
    return events


# ---------------------------------------------------------------------------------------------
# Measurement.


def best_of(repeats: int, work: Callable[[], T]) -> tuple[float, T]:
    """The fastest of `repeats` timed calls (seconds) and the last call's result."""
    best = float("inf")
    result: Any = None
    for _ in range(repeats):
        result = None
        gc.collect()
        start = time.perf_counter()
        result = work()
        best = min(best, time.perf_counter() - start)
    return best, result


def decode_packed(lines: list[bytes]) -> list[SessionEvent]:
    events: list[SessionEvent] = []
    for line in lines:
        events.extend(decode_storage_record(decode_record_json(line)))
    return events


def decode_raw(lines: list[bytes]) -> list[SessionEvent]:
    return [decode_event(line) for line in lines]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed repetitions (default 5)")
    parser.add_argument("--seed", type=int, default=SEED, help=f"random seed (default {SEED})")
    args = parser.parse_args(argv)
    repeats: int = args.repeats

    started = time.perf_counter()
    events = build_session(args.seed)
    deltas = sum(1 for e in events if type(e) is AssistantChunk and type(e.data.chunk) is TextDelta)
    log(
        f"built {len(events):,} events ({deltas:,} text deltas in {RUNS} runs) "
        f"in {time.perf_counter() - started:.2f} s"
    )

    raw_lines = [encode_event(e) for e in events]
    pack_s, records = best_of(repeats, lambda: pack_chunk_runs(events))
    rows = sum(1 for r in records if isinstance(r, (TextChunks, ReasoningChunks, ToolCallChunks)))
    packed_lines = [msgspec.json.encode(r) for r in records]
    raw_bytes = sum(len(line) + 1 for line in raw_lines)
    packed_bytes = sum(len(line) + 1 for line in packed_lines)

    packed_decode_s, decoded = best_of(repeats, lambda: decode_packed(packed_lines))
    if decoded != events:
        raise SystemExit("packed decoding did not give back the events")
    del decoded
    raw_decode_s, decoded = best_of(repeats, lambda: decode_raw(raw_lines))
    if decoded != events:
        raise SystemExit("raw decoding did not give back the events")
    del decoded

    n = len(events)
    result = {
        "events": n,
        "deltaEvents": deltas,
        "runs": RUNS,
        "records": len(records),
        "rows": rows,
        "rawBytes": raw_bytes,
        "packedBytes": packed_bytes,
        "packedToRawBytes": round(packed_bytes / raw_bytes, 4),
        "packEventsPerSec": round(n / pack_s),
        "packedDecodeEventsPerSec": round(n / packed_decode_s),
        "rawDecodeEventsPerSec": round(n / raw_decode_s),
        "decodeSpeedup": round(raw_decode_s / packed_decode_s, 2),
        "packSeconds": round(pack_s, 4),
        "packedDecodeSeconds": round(packed_decode_s, 4),
        "rawDecodeSeconds": round(raw_decode_s, 4),
        "repeats": repeats,
        "seed": args.seed,
        "python": platform.python_version(),
        "msgspec": msgspec.__version__,
    }
    log(f"records: {len(records):,} top-level ({rows} rows, {len(records) - rows:,} plain events)")
    log(
        f"JSON bytes: raw {raw_bytes:,}, packed {packed_bytes:,} "
        f"(packed/raw {packed_bytes / raw_bytes:.1%}, {1 - packed_bytes / raw_bytes:.1%} smaller)"
    )
    log(f"pack:           {n / pack_s:>14,.0f} events/s ({pack_s * 1000:.1f} ms)")
    log(f"decode packed:  {n / packed_decode_s:>14,.0f} events/s ({packed_decode_s * 1000:.1f} ms)")
    log(f"decode raw:     {n / raw_decode_s:>14,.0f} events/s ({raw_decode_s * 1000:.1f} ms)")
    log(f"decode speedup: {raw_decode_s / packed_decode_s:.2f}x (packed vs raw), best of {repeats}")
    log(f"total run time {time.perf_counter() - started:.1f} s")
    print("CODEC_PERF_RESULT " + json.dumps(result, separators=(",", ":")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
