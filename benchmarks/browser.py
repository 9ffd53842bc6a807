"""A long history in a real browser: paged, decoded and folded by the shipped client modules.

Builds `benchmarks/load.py`'s session (1,000 turns, 409,000 events: 400 text deltas a turn,
packed on disk) with its own `write_session`, starts `acp-server serve --listen 127.0.0.1:0`
on it, and drives Debian's Chromium headless through Playwright. The page is the server's
answer to a path it does not serve (`/benchmark`: a plain-text 404 document), so that it is at
the server's origin, with no viewer script running beside the measurement and no
Content-Security-Policy (the viewer's pages allow a WebSocket to their own host only, and the
wire pass below goes through a relay); a document made up by Playwright's router would not do,
as Chromium's Local Network Access checks refuse it a WebSocket to 127.0.0.1. From there the page
`import()`s `/client.js` and `/fold.js` and opens the WebSocket at `/acp?token=`, its `Origin`
the server's own. Chromium offers permessage-deflate and the server accepts it
(the negotiated extension is reported).

Each round, in a fresh browser context, measured in the page with `performance.now()` from just
before the WebSocket is opened:

- connected: open, then `initialize` answered;
- pages: the newest page from `session.follow` (50 messages, as the viewer's snapshot), then
  every older page by `session.page` (`beforeSeq` = the first seq of the page before, 50
  messages a page) down to seq 0. The next request goes out as soon as a page arrives (its first
  seq is read off its first record), before that page is decoded, so the server's work on page
  n + 1 overlaps the browser's on page n; "all pages received" is when the last answer arrived;
- decoded: each page goes into one `Journal` (`fromSnapshot`, then `prepend`), which decodes it
  with the module's `decodeRecords` (every row expanded and checked, SPEC 2.1) and checks it
  joins the head; "decode share" is the sum of those calls alone, and "all events decoded" is
  when the last one returned and `journal.events` (joining the prepended pages) was read;
- folded: all events, oldest first, through one `ConversationFold` with the default
  definitions (`feed` event by event, the changes counted, not kept), then `nodes()`: "all
  folded" is the conversation's final state computed, not painted (no DOM is built);
- heap: V8's used JS heap, sampled in the page (`performance.memory.usedJSHeapSize`, exact
  with `--enable-precise-memory-info`) after every page and every 20,000 folded events, and
  from outside by CDP `Performance.getMetrics` `JSHeapUsedSize` every 50 ms (answered only
  between the page's tasks); the peak is the highest sample of either, also given above the
  baseline taken after a forced GC (CDP `HeapProfiler.collectGarbage`) on the fresh page. After
  the run, the pages' records are dropped, GC is forced again, and what stays (the journal's
  events and the fold's nodes) is the retained heap. Transient peaks between samples are missed,
  and memory outside the V8 heap (strings' backing stores are inside it; ArrayBuffers, the
  network stack's buffers are not) is not counted;
- decode only, in the same page afterwards: `decodeRecords` over every page's records already
  received, `--repeats` times (min and median over all rounds' runs; the code is warm by then,
  unlike in the decode share above, which is the first decoding a fresh page does), to set
  beside the seed note's 276 ms client decode in V8.

Then one more pass, not timed, for the bytes (CDP's Network domain copies every frame to the
benchmark, which would slow the timed rounds): the WebSocket goes through a TCP relay on
127.0.0.1 that counts the bytes server to browser (the upgrade response, frame headers, and
payloads compressed by permessage-deflate: what is on the wire), while CDP
`Network.webSocketFrameReceived` gives every frame's payload as the page got it (inflated; its
UTF-8 length summed). The same pass keeps the frames' text in the page and times
`JSON.parse` of them plus `decodeRecords`, `--repeats` times, for the parse-and-decode figure.

Run from the repository root: `python benchmarks/browser.py [--rounds N] [--repeats N]`.
Needs `playwright` (the Python package; the browser is /usr/bin/chromium, never downloaded).
Human-readable lines go to stderr; stdout gets exactly one line, `BROWSER_PERF_RESULT {json}`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import socket
import statistics
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from load import SEED, SESSION_ID, write_session  # noqa: E402
from playwright.async_api import Browser, CDPSession, Page, async_playwright  # noqa: E402
from websocket import Listening  # noqa: E402

from acp_server.storage.jsonl.sessions import SessionStore  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--enable-precise-memory-info",
]
MAX_MESSAGES = 50
HEAP_POLL_S = 0.05
TIMEOUT_MS = 300_000

# The measured run, in the page. Its state stays on `globalThis.bench` for the later steps.
RUN = """
async ({ url, sessionId, maxMessages, keepFrames }) => {
  const client = await import("/client.js");
  const { ConversationFold } = await import("/fold.js");
  const heap = { peak: 0, samples: 0 };
  const sample = () => {
    const used = performance.memory.usedJSHeapSize;
    heap.samples++;
    if (used > heap.peak) heap.peak = used;
  };
  const frames = [];
  class Socket extends WebSocket {
    constructor(address) {
      super(address);
      if (keepFrames) this.addEventListener("message", (event) => frames.push(event.data));
      globalThis.benchSocket = this;
    }
  }
  const firstSeq = (record) => ("event" in record ? record.event.seq : record.chunks.seq0);
  sample();
  const t0 = performance.now();
  const connection = await client.AcpConnection.open(url, { WebSocket: Socket });
  await connection.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
  const connected = performance.now() - t0;
  const address = { kind: "session", sessionId };
  const snapshot = await connection.request("session.follow", { address, maxMessages });
  const older = (beforeSeq) =>
    connection.request("session.page", {
      address, throughSeq: snapshot.cursor, beforeSeq, maxMessages,
    });
  let next = snapshot.hasMore ? older(firstSeq(snapshot.records[0])) : null;
  let received = performance.now() - t0;
  let decodeMs = 0;
  let start = performance.now();
  const journal = client.Journal.fromSnapshot(snapshot.records, snapshot.cursor, snapshot.hasMore);
  decodeMs += performance.now() - start;
  const pages = [snapshot.records];
  let records = snapshot.records.length;
  sample();
  while (next) {
    const page = await next;
    received = performance.now() - t0;
    next = page.hasMore ? older(firstSeq(page.records[0])) : null;
    start = performance.now();
    journal.prepend(page.records, page.hasMore);
    decodeMs += performance.now() - start;
    pages.push(page.records);
    records += page.records.length;
    sample();
  }
  start = performance.now();
  const events = journal.events;
  decodeMs += performance.now() - start;
  const decoded = performance.now() - t0;
  sample();
  const fold = new ConversationFold();
  let changes = 0;
  for (let i = 0; i < events.length; i++) {
    changes += fold.feed(events[i]).length;
    if (i % 20000 === 0) sample();
  }
  const nodes = fold.nodes();
  const folded = performance.now() - t0;
  sample();
  await connection.request("session.unfollow", { subscriptionId: snapshot.subscriptionId });
  const extensions = globalThis.benchSocket.extensions;
  connection.close();
  globalThis.bench = { pages, journal, fold, frames };
  return {
    connected, received, decoded, folded, decodeMs, extensions,
    pages: pages.length, records, events: events.length, firstSeq: journal.firstSeq,
    lastSeq: journal.lastSeq, nodes: nodes.length, changes,
    heapPeak: heap.peak, heapSamples: heap.samples,
  };
}
"""

# Decoding again what was received: each repeat's milliseconds (and the events it gave).
DECODE_ONLY = """
({ repeats, parse }) => {
  return import("/client.js").then((client) => {
    const { pages, frames } = globalThis.bench;
    const times = [];
    let events = 0;
    for (let r = 0; r < repeats; r++) {
      const start = performance.now();
      events = 0;
      if (parse) {
        for (const frame of frames) {
          const message = JSON.parse(frame);
          if (message.result && message.result.records) {
            events += client.decodeRecords(message.result.records).length;
          }
        }
      } else {
        for (const records of pages) events += client.decodeRecords(records).length;
      }
      times.push(performance.now() - start);
    }
    return { times, events };
  });
}
"""


def say(line: str = "") -> None:
    print(line, file=sys.stderr, flush=True)


class CountingRelay:
    """A TCP relay on 127.0.0.1 to `upstream`, counting the bytes each way (for the wire)."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.down = 0  # server to browser
        self.up = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                inbound, _ = self._listener.accept()
            except OSError:
                return
            outbound = socket.create_connection(self.upstream)
            for sock in (inbound, outbound):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._pump, args=(outbound, inbound, True), daemon=True).start()
            threading.Thread(
                target=self._pump, args=(inbound, outbound, False), daemon=True
            ).start()

    def _pump(self, source: socket.socket, sink: socket.socket, down: bool) -> None:
        try:
            while data := source.recv(1 << 16):
                with self._lock:
                    if down:
                        self.down += len(data)
                    else:
                        self.up += len(data)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._listener.close()


async def heap_used(cdp: CDPSession) -> int:
    metrics = (await cdp.send("Performance.getMetrics"))["metrics"]
    return int(next(m["value"] for m in metrics if m["name"] == "JSHeapUsedSize"))


async def collected_heap(cdp: CDPSession) -> int:
    await cdp.send("HeapProfiler.collectGarbage")
    return await heap_used(cdp)


async def open_page(browser: Browser, base: str) -> tuple[Page, CDPSession]:
    context = await browser.new_context()
    page = await context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    await page.goto(f"{base}/benchmark")
    cdp = await context.new_cdp_session(page)
    await cdp.send("Performance.enable")
    await cdp.send("HeapProfiler.enable")
    return page, cdp


async def timed_round(browser: Browser, base: str, ws_url: str, repeats: int) -> dict[str, Any]:
    page, cdp = await open_page(browser, base)
    baseline = await collected_heap(cdp)
    run = asyncio.create_task(
        page.evaluate(
            RUN,
            {
                "url": ws_url,
                "sessionId": SESSION_ID,
                "maxMessages": MAX_MESSAGES,
                "keepFrames": False,
            },
        )
    )
    polled = 0
    while not run.done():
        polled = max(polled, await heap_used(cdp))
        await asyncio.sleep(HEAP_POLL_S)
    figures: dict[str, Any] = await run
    figures["heapPeak"] = max(figures["heapPeak"], polled)
    figures["heapBaseline"] = baseline
    decode = await page.evaluate(DECODE_ONLY, {"repeats": repeats, "parse": False})
    assert decode["events"] == figures["events"], decode
    figures["decodeOnly"] = decode["times"]
    await page.evaluate("() => { globalThis.bench.pages = null; }")
    figures["heapRetained"] = await collected_heap(cdp)
    await page.context.close()
    return figures


async def wire_pass(browser: Browser, base: str, ws_url: str, repeats: int) -> dict[str, Any]:
    page, cdp = await open_page(browser, base)
    payload = {"frames": 0, "bytes": 0}
    handshake: dict[str, str] = {}

    def frame(params: dict[str, Any]) -> None:
        payload["frames"] += 1
        payload["bytes"] += len(params["response"]["payloadData"].encode())

    def answered(params: dict[str, Any]) -> None:
        handshake.update({k.lower(): v for k, v in params["response"]["headers"].items()})

    cdp.on("Network.webSocketFrameReceived", frame)
    cdp.on("Network.webSocketHandshakeResponseReceived", answered)
    await cdp.send("Network.enable")
    figures: dict[str, Any] = await page.evaluate(
        RUN,
        {"url": ws_url, "sessionId": SESSION_ID, "maxMessages": MAX_MESSAGES, "keepFrames": True},
    )
    await cdp.send("Network.disable")
    parse = await page.evaluate(DECODE_ONLY, {"repeats": repeats, "parse": True})
    assert parse["events"] == figures["events"], parse
    await page.context.close()
    return {
        "frames": payload["frames"],
        "payloadBytes": payload["bytes"],
        "extensions": handshake.get("sec-websocket-extensions", ""),
        "parseDecode": parse["times"],
        "events": figures["events"],
    }


def ms(values: list[float]) -> str:
    return (
        f"median {statistics.median(values):7.1f} ms  ("
        + ", ".join(f"{v:.0f}" for v in values)
        + ")"
    )


def mb(value: float) -> str:
    return f"{value / 1e6:.1f} MB"


async def run(args: argparse.Namespace, sessions: Path) -> dict[str, Any]:
    server = Listening(sessions)
    base = f"http://{server.address}"
    ws_url = f"ws://{server.address}/acp?token={server.token}"
    host, port = server.address.rsplit(":", 1)
    relay = CountingRelay((host, int(port)))
    try:
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
            )
            say(f"Chromium {browser.version}, server at {base}")
            rounds = []
            for n in range(args.rounds):
                figures = await timed_round(browser, base, ws_url, args.repeats)
                rounds.append(figures)
                say(
                    f"  round {n + 1}: pages {figures['received']:.0f} ms, decoded "
                    f"{figures['decoded']:.0f} ms (decode share {figures['decodeMs']:.0f} ms), "
                    f"folded {figures['folded']:.0f} ms, heap peak {mb(figures['heapPeak'])}"
                )
            wire_url = f"ws://127.0.0.1:{relay.port}/acp?token={server.token}"
            wire = await wire_pass(browser, base, wire_url, args.repeats)
            await browser.close()
    finally:
        relay.close()
        server.close()
    wire["wireBytes"] = relay.down
    wire["wireBytesUp"] = relay.up
    return {"rounds": rounds, "wire": wire}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--rounds", type=int, default=3, help="timed runs, each in a fresh context (default 3)"
    )
    parser.add_argument(
        "--repeats", type=int, default=5, help="decode-only repetitions a round (default 5)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        sessions = root / "sessions"
        write_session(SessionStore(sessions), str(root), random.Random(SEED))
        say(f"session of {SESSION_ID}: built in {root}; {args.rounds} rounds")
        measured = asyncio.run(run(args, sessions))
    rounds, wire = measured["rounds"], measured["wire"]
    first = rounds[0]
    for figures in rounds:
        for key in ("events", "pages", "records", "nodes", "changes", "firstSeq", "lastSeq"):
            assert figures[key] == first[key], (key, figures[key], first[key])
    assert first["firstSeq"] == 0 and first["lastSeq"] == first["events"] - 1, first

    def series(key: str) -> list[float]:
        return [float(figures[key]) for figures in rounds]

    decode_only = [t for figures in rounds for t in figures["decodeOnly"]]
    decode_cold = [figures["decodeOnly"][0] for figures in rounds]
    peaks = series("heapPeak")
    above = [f["heapPeak"] - f["heapBaseline"] for f in rounds]
    retained = [f["heapRetained"] - f["heapBaseline"] for f in rounds]
    say(
        f"{first['events']} events in {first['pages']} pages, {first['records']} records; "
        f"{first['nodes']} nodes, {first['changes']} changes; extensions "
        f"{first['extensions']!r}"
    )
    say(f"  connected + initialize      {ms(series('connected'))}")
    say(f"  all pages received          {ms(series('received'))}")
    say(f"  all events decoded          {ms(series('decoded'))}")
    say(f"    decode share (journal)    {ms(series('decodeMs'))}")
    say(f"  all folded                  {ms(series('folded'))}")
    say(
        f"  decode only, {len(decode_only)} runs     min {min(decode_only):.1f} ms, median "
        f"{statistics.median(decode_only):.1f} ms (each round's first: "
        + ", ".join(f"{v:.0f}" for v in decode_cold)
        + " ms)"
    )
    say(
        f"  parse + decode, {len(wire['parseDecode'])} runs    min "
        f"{min(wire['parseDecode']):.1f} ms, median {statistics.median(wire['parseDecode']):.1f} ms"
    )
    say(
        f"  heap peak {mb(statistics.median(peaks))} (median; above baseline "
        f"{mb(statistics.median(above))}); retained after GC {mb(statistics.median(retained))} "
        "above baseline"
    )
    say(
        f"  wire: {wire['frames']} frames received, payloads {mb(wire['payloadBytes'])} inflated, "
        f"{mb(wire['wireBytes'])} on the wire (TCP, server to browser), "
        f"extensions {wire['extensions']!r}"
    )

    def median(values: list[float]) -> float:
        return round(statistics.median(values), 1)

    result = {
        "chromium": CHROMIUM,
        "rounds": args.rounds,
        "repeats": args.repeats,
        "events": first["events"],
        "pages": first["pages"],
        "records": first["records"],
        "nodes": first["nodes"],
        "changes": first["changes"],
        "max_messages": MAX_MESSAGES,
        "ms": {
            "connected": median(series("connected")),
            "all_pages_received": median(series("received")),
            "all_events_decoded": median(series("decoded")),
            "decode_share": median(series("decodeMs")),
            "all_folded": median(series("folded")),
            "decode_only_min": round(min(decode_only), 1),
            "decode_only_median": median(decode_only),
            "decode_only_first_run": median(decode_cold),
            "parse_decode_min": round(min(wire["parseDecode"]), 1),
            "parse_decode_median": median(wire["parseDecode"]),
        },
        "ms_per_round": {
            key: [round(v, 1) for v in series(key)]
            for key in ("received", "decoded", "decodeMs", "folded")
        },
        "heap_bytes": {
            "peak": int(statistics.median(peaks)),
            "peak_above_baseline": int(statistics.median(above)),
            "retained_above_baseline": int(statistics.median(retained)),
            "baseline": int(statistics.median(series("heapBaseline"))),
        },
        "wire": {
            "extensions": wire["extensions"],
            "frames_received": wire["frames"],
            "payload_bytes_inflated": wire["payloadBytes"],
            "tcp_bytes_server_to_browser": wire["wireBytes"],
            "tcp_bytes_browser_to_server": wire["wireBytesUp"],
        },
    }
    print("BROWSER_PERF_RESULT " + json.dumps(result, separators=(",", ":")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
