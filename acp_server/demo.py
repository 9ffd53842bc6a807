"""`acp-server demo`: what the project does, shown end to end on a bundled conversation.

For now it streams a synthetic conversation into a real session log in a temporary sessions
root, reads it back, and reports what the packed chunk rows saved; the stdio server will take
its place in this demo as it lands.
"""

from __future__ import annotations

import random
import sys
import tempfile
import time

from .core.chunk_rows import pack_chunk_runs
from .core.events import (
    AssistantChunk,
    AssistantChunkData,
    AssistantMessage,
    AssistantMessageData,
    AssistantMessageEvent,
    AssistantText,
    SessionEvent,
    StepData,
    StepEnd,
    StepStart,
    TextContent,
    TextDelta,
    TurnEnd,
    TurnEndData,
    TurnEndReasonCompleted,
    TurnStart,
    TurnStartData,
    UserMessage,
    UserMessageData,
    UserMessageEvent,
)
from .core.header import SESSION_FORMAT_VERSION, SessionHeader
from .storage.log import encode_records
from .storage.store import SessionStore

_WORDS = "the log keeps every token as it streamed yet stores each run as one packed row".split()


def _conversation(turns: int, deltas_per_turn: int, seed: int = 7) -> list[SessionEvent]:
    rng = random.Random(seed)
    events: list[SessionEvent] = []
    now = 1_700_000_000_000

    def add(make, data) -> None:  # type: ignore[no-untyped-def]
        events.append(make(len(events), now, data))

    for turn in range(turns):
        add(TurnStart, TurnStartData(turn))
        add(UserMessageEvent, UserMessageData(turn, UserMessage(f"u{turn}", [TextContent("Explain the log format.")])))
        add(StepStart, StepData(turn, 0))
        first = len(events)
        texts = [" " + rng.choice(_WORDS) for _ in range(deltas_per_turn)]
        for text in texts:
            now += rng.randint(0, 40)
            add(AssistantChunk, AssistantChunkData(turn, 0, TextDelta(0, text)))
        message = AssistantMessage(f"a{turn}", [AssistantText("".join(texts))])
        events.append(
            AssistantMessageEvent(len(events), now, AssistantMessageData(turn, 0, message), source_range=(first, len(events) - 1))
        )
        add(StepEnd, StepData(turn, 0))
        add(TurnEnd, TurnEndData(turn, TurnEndReasonCompleted()))
    return events


def run_demo() -> int:
    events = _conversation(turns=4, deltas_per_turn=2_000)
    with tempfile.TemporaryDirectory(prefix="acp-server-demo-") as root:
        store = SessionStore(root)
        writer = store.create(SessionHeader(version=SESSION_FORMAT_VERSION, id="demo", created_at=0, cwd=root))
        writer.append(events)
        writer.close()
        packed_bytes = store.log_path("demo").stat().st_size
        started = time.perf_counter()
        contents = store.read("demo")
        read_ms = (time.perf_counter() - started) * 1000
    assert contents.events == events, "the log did not give back what was written"
    unpacked_bytes = len(encode_records([contents.header, *events]))
    rows = sum(1 for r in pack_chunk_runs(events) if not hasattr(r, "seq"))
    out = sys.stdout
    out.write("acp-server demo: a streamed conversation written to a session log and read back\n\n")
    out.write(f"  events                {len(events):>10,}\n")
    out.write(f"  chunk rows            {rows:>10,}\n")
    out.write(f"  log bytes, packed     {packed_bytes:>10,}\n")
    out.write(f"  log bytes, unpacked   {unpacked_bytes:>10,}\n")
    out.write(f"  packed / unpacked     {packed_bytes / unpacked_bytes:>10.1%}\n")
    out.write(f"  read back (ms)        {read_ms:>10.1f}\n\n")
    out.write("Every event came back exactly as written.\n")
    return 0
