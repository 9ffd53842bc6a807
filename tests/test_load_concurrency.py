"""Load: many sessions streaming at once in one server while a client follows and pages them
(SPEC 0, 3).

One `acp-server` process replays, in each of `ACP_LOAD_SESSIONS` sessions (default 20) at once,
a turn streaming `ACP_LOAD_CHUNKS` text chunks (default 2,000) at `--pace-ms 1`, after a short
warm-up turn. While they stream, the client (raw frames over the real pipe) follows every
session, some with a one-message snapshot that it then completes by paging older history, and
pages some sessions in the middle of their stream. Meanwhile a thread samples the server's
resident memory from `/proc/PID/status`.

Checked: every stdout line is one whole JSON-RPC message (no interleaving, nothing torn); per
session the older pages, the snapshot and the `session.event` notifications are, together and
in order, exactly the final log (nothing dropped, nothing doubled, no overflow); every live text
chunk reached the client; a page read mid-stream matches the log; and the server's RSS stayed
under `RSS_LIMIT_MB`. The figures (wall time, frames, peak RSS) are printed, and appended as a
JSON line to `ACP_LOAD_REPORT` when that is set.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import pytest
from acp_process import AcpProcess, assert_jsonrpc_frame
from fixtures_builder import FRAGMENT_SIZES, Scenario, Step, fragments, write_fixture

from acp_server.core.history import expand_history_records
from acp_server.storage.jsonl.log import read_log

pytestmark = pytest.mark.process

SESSIONS = int(os.environ.get("ACP_LOAD_SESSIONS", "20"))
CHUNKS = int(os.environ.get("ACP_LOAD_CHUNKS", "2000"))
REPORT = os.environ.get("ACP_LOAD_REPORT")
RSS_LIMIT_MB = 300
TIMEOUT = 60.0 + SESSIONS * CHUNKS / 2000  # seconds without a frame before giving up

WARM_UP = "Ready."
LONG_PROMPT = "Tell me everything."
PAGED_EVERY = 4
"""Every PAGED_EVERY-th session is followed with a one-message snapshot and paged back."""


def long_text(chunks: int) -> str:
    """A text that `fragments` cuts into exactly `chunks` pieces."""
    length = sum(FRAGMENT_SIZES[n % len(FRAGMENT_SIZES)] for n in range(chunks))
    text = "".join(f"w{n} " for n in range(length))[:length]
    assert len(fragments(text)) == chunks
    return text


def event_json(event: Any) -> dict[str, Any]:
    return msgspec.json.decode(msgspec.json.encode(event))


@dataclass
class Watched:
    """What the client holds of one session."""

    session_id: str
    paged: bool
    prompt_id: Any = None
    stop_reason: str | None = None
    subscription: str | None = None
    cursor: int = -1
    snapshot: list[dict[str, Any]] = field(default_factory=list)
    older: list[dict[str, Any]] = field(default_factory=list)
    """Events of older pages, oldest first."""
    has_older: bool = False
    paging: bool = False
    followed: list[dict[str, Any]] = field(default_factory=list)
    live_text: list[str] = field(default_factory=list)
    mid_stream_page: list[dict[str, Any]] | None = None
    mid_stream_asked: bool = False

    @property
    def last_seq(self) -> int:
        return self.followed[-1]["seq"] if self.followed else self.cursor

    def done(self) -> bool:
        followed_to_the_end = (
            bool(self.followed)
            and self.followed[-1]["type"] == "turn/end"
            and self.followed[-1]["data"]["turn"] == 1
        )
        return (
            self.stop_reason is not None
            and followed_to_the_end
            and not self.has_older
            and not self.paging
            and (not self.mid_stream_asked or self.mid_stream_page is not None)
        )


class RssSampler(threading.Thread):
    """Samples a process's VmRSS every 20 ms until stopped."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak_kb = 0
        self.samples = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        path = f"/proc/{self.pid}/status"
        while not self._stop_event.wait(0.02):
            try:
                with open(path) as status:
                    for line in status:
                        if line.startswith("VmRSS:"):
                            self.peak_kb = max(self.peak_kb, int(line.split()[1]))
                            self.samples += 1
                            break
            except (FileNotFoundError, ProcessLookupError):
                return

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def test_concurrent_streams_followed_and_paged_lose_nothing_and_stay_bounded(
    tmp_path: Path,
) -> None:
    text = long_text(CHUNKS)
    fixture = write_fixture(
        tmp_path / "fixture",
        Scenario([("warm up", [Step(text=WARM_UP)]), (LONG_PROMPT, [Step(text=text)])]),
    )
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    sessions_dir = tmp_path / "sessions"
    started = time.monotonic()
    with AcpProcess(sessions_dir, "--replay", str(fixture), "--pace-ms", "1") as server:
        sampler = RssSampler(server.process.pid)
        sampler.start()
        server.initialize()
        watched: dict[str, Watched] = {}
        for n in range(SESSIONS):
            session_id = server.result("session/new", {"cwd": str(workspace), "mcpServers": []})[
                "sessionId"
            ]
            warm, _ = server.exchange(
                "session/prompt",
                {"sessionId": session_id, "prompt": [{"type": "text", "text": "warm up"}]},
            )
            assert warm["result"] == {"stopReason": "end_turn"}
            watched[session_id] = Watched(session_id, paged=n % PAGED_EVERY == 0)

        pending: dict[Any, tuple[str, Watched]] = {}
        by_subscription: dict[str, Watched] = {}
        for w in watched.values():  # every prompt first, then every follow: all stream at once
            w.prompt_id = server.send_request(
                "session/prompt",
                {"sessionId": w.session_id, "prompt": [{"type": "text", "text": LONG_PROMPT}]},
            )
            pending[w.prompt_id] = ("prompt", w)
        for w in watched.values():
            address = {"kind": "session", "sessionId": w.session_id}
            request_id = server.send_request(
                "session.follow", {"address": address, "maxMessages": 1 if w.paged else 50}
            )
            pending[request_id] = ("follow", w)

        frames = 0
        while not all(w.done() for w in watched.values()):
            frame = server.read_frame(TIMEOUT)
            frames += 1
            method = frame.get("method")
            if method == "session/update":
                w = watched[frame["params"]["sessionId"]]
                update = frame["params"]["update"]
                assert update["sessionUpdate"] == "agent_message_chunk", update
                w.live_text.append(update["content"]["text"])
            elif method == "session.event":
                w = by_subscription[frame["params"]["subscriptionId"]]
                event = frame["params"]["event"]
                assert event["seq"] == w.last_seq + 1, (w.session_id, event["seq"], w.last_seq)
                w.followed.append(event)
                if (
                    w.paged
                    and not w.mid_stream_asked
                    and event["type"] == "assistant/chunk"
                    and event["data"]["turn"] == 1
                ):
                    w.mid_stream_asked = True  # page the stream while it runs
                    address = {"kind": "session", "sessionId": w.session_id}
                    request_id = server.send_request(
                        "session.page",
                        {"address": address, "throughSeq": event["seq"], "maxMessages": 1},
                    )
                    pending[request_id] = ("mid-stream page", w)
            elif method is not None:
                raise AssertionError(f"unexpected frame: {frame}")
            else:
                kind, w = pending.pop(frame["id"])
                assert "result" in frame, (kind, frame)
                result = frame["result"]
                if kind == "prompt":
                    w.stop_reason = result["stopReason"]
                elif kind == "follow":
                    w.subscription = result["subscriptionId"]
                    by_subscription[w.subscription] = w
                    w.cursor = result["cursor"]
                    w.snapshot = [event_json(e) for e in expand_history_records(result["records"])]
                    w.has_older = result["hasMore"]
                elif kind == "mid-stream page":
                    w.mid_stream_page = [
                        event_json(e) for e in expand_history_records(result["records"])
                    ]
                else:
                    page = [event_json(e) for e in expand_history_records(result["records"])]
                    w.older = page + w.older
                    w.has_older = result["hasMore"]
                    w.paging = False
            # Page older history for the paged sessions, one page at a time.
            for w in watched.values():
                if w.subscription is not None and w.has_older and not w.paging:
                    first = (w.older or w.snapshot)[0]["seq"]
                    address = {"kind": "session", "sessionId": w.session_id}
                    request_id = server.send_request(
                        "session.page",
                        {
                            "address": address,
                            "throughSeq": w.cursor,
                            "beforeSeq": first,
                            "maxMessages": 1,
                        },
                    )
                    pending[request_id] = ("older page", w)
                    w.paging = True
        elapsed = time.monotonic() - started
        sampler.stop()
        assert server.finish(TIMEOUT) == 0, server.stderr

    assert server.stdout_tail == b""
    for line in server.stdout_lines:
        assert_jsonrpc_frame(line)
    assert "Traceback" not in server.stderr, server.stderr
    for w in watched.values():
        log = [
            event_json(e) for e in read_log(sessions_dir / w.session_id / "session.jsonl").events
        ]
        assert w.stop_reason == "end_turn"
        assert w.older + w.snapshot + w.followed == log, w.session_id
        assert "".join(w.live_text) == text and len(w.live_text) == CHUNKS
        if w.mid_stream_page is not None:
            first = w.mid_stream_page[0]["seq"]
            assert w.mid_stream_page == log[first : first + len(w.mid_stream_page)]
            assert w.mid_stream_page[-1]["type"] == "assistant/chunk"
    assert any(w.mid_stream_page for w in watched.values()), (
        "no session was paged while it streamed"
    )
    peak_mb = sampler.peak_kb / 1024
    figures = {
        "sessions": SESSIONS,
        "chunks_per_session": CHUNKS,
        "seconds": round(elapsed, 2),
        "frames_read": frames,
        "stdout_lines": len(server.stdout_lines),
        "peak_rss_mb": round(peak_mb, 1),
        "rss_samples": sampler.samples,
    }
    print("LOAD", json.dumps(figures))
    if REPORT:
        with open(REPORT, "a") as report:
            report.write(json.dumps(figures) + "\n")
    assert sampler.samples > 0
    assert peak_mb < RSS_LIMIT_MB, figures
