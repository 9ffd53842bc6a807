// What the browser client's tests share: session logs as parsed JSON, a canonical packer for
// their text and reasoning deltas (SPEC 2.1, enough for these logs), SPEC 3.1's pages of a
// log, and a WebSocket stand-in.

export const TEXT = ["He", "llo", ",", " wor", "ld", "!"];

/** A text-delta event of LOG's one step. */
export function chunk(seq, text, time = 1000 + seq) {
  return {
    type: "assistant/chunk",
    seq,
    time,
    data: { turn: 0, step: 0, chunk: { type: "text-delta", index: 0, text } },
  };
}

/** A small log: one turn whose step streams six text deltas (one row on the wire). */
export const LOG = [
  { type: "turn/start", seq: 0, time: 1000, data: { turn: 0 } },
  {
    type: "user/message",
    seq: 1,
    time: 1001,
    data: { turn: 0, message: { id: "u0", content: [{ type: "text", text: "Hi" }] } },
  },
  { type: "step/start", seq: 2, time: 1002, data: { turn: 0, step: 0 } },
  ...TEXT.map((text, k) => chunk(3 + k, text)),
  {
    type: "assistant/message",
    seq: 9,
    time: 1009,
    data: { turn: 0, step: 0, message: { id: "a0", content: [{ type: "text", text: "Hello, world!" }] } },
    sourceRange: [3, 8],
  },
  { type: "step/end", seq: 10, time: 1010, data: { turn: 0, step: 0 } },
  { type: "turn/end", seq: 11, time: 1011, data: { turn: 0, reason: { kind: "completed" } } },
];

const ROWS = { "text-delta": "text-chunks", "reasoning-delta": "reasoning-chunks" };

/** The delta an event is a member of a row for, as `{kind, key}`, or null. */
function member(event) {
  const keys = Object.keys(event).join();
  if (event.type !== "assistant/chunk" || keys !== "type,seq,time,data") return null;
  const kind = ROWS[event.data.chunk.type];
  if (!kind || Object.keys(event.data.chunk).join() !== "type,index,text") return null;
  return { kind, key: `${kind}/${event.data.turn}/${event.data.step}/${event.data.chunk.index}` };
}

/** `events` as wire records: runs of three or more deltas of one block packed into rows. */
export function wire(events) {
  const records = [];
  let run = [];
  const close = () => {
    if (run.length >= 3) {
      const [first] = run;
      records.push({
        chunks: {
          type: member(first).kind,
          seq0: first.seq,
          time0: first.time,
          data: {
            turn: first.data.turn,
            step: first.data.step,
            index: first.data.chunk.index,
            dt: run.slice(1).map((event, k) => event.time - run[k].time),
            texts: run.map((event) => event.data.chunk.text),
          },
        },
      });
    } else {
      records.push(...run.map((event) => ({ event })));
    }
    run = [];
  };
  for (const event of events) {
    const m = member(event);
    const last = run.at(-1);
    if (m && last && member(last).key === m.key && event.seq === last.seq + 1) {
      run.push(event);
    } else {
      close();
      if (m) run.push(event);
      else records.push({ event });
    }
  }
  close();
  return JSON.parse(JSON.stringify(records));
}

const MESSAGES = new Set(["user/message", "assistant/message"]);

/** SPEC 3.1's page of `log` ending before `end`: the newest `maxMessages` messages, each
 * with its chunks. */
export function page(log, end, maxMessages) {
  const cuts = [];
  for (const event of log.slice(0, end)) {
    if (MESSAGES.has(event.type)) cuts.push(Math.min(event.seq, event.sourceRange?.[0] ?? event.seq));
  }
  const start = cuts.length <= maxMessages ? 0 : Math.min(...cuts.slice(cuts.length - maxMessages));
  return { records: wire(log.slice(start, end)), hasMore: start > 0 };
}

/** A pseudo-random log of `turns` turns (seeded: each run of the tests sees the same logs). */
export function randomLog(seed, turns) {
  let state = seed;
  const next = (n) => {
    // mulberry32
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) % n;
  };
  const log = [];
  const add = (type, data, extra = {}) =>
    log.push({ type, seq: log.length, time: 5000 + log.length - next(3), data, ...extra });
  for (let turn = 0; turn < turns; turn++) {
    add("turn/start", { turn });
    add("user/message", { turn, message: { id: `u${turn}`, content: [{ type: "text", text: "?" }] } });
    for (let step = 0; step <= next(2); step++) {
      add("step/start", { turn, step });
      const first = log.length;
      for (const [index, type] of [[0, "reasoning-delta"], [1, "text-delta"]]) {
        for (let k = next(8); k > 0; k--) add("assistant/chunk", { turn, step, chunk: { type, index, text: "ab😀".slice(0, next(4)) } });
      }
      const content = [{ type: "text", text: "…" }];
      add("assistant/message", { turn, step, message: { id: `a${turn}.${step}`, content } }, { sourceRange: [first, Math.max(first, log.length - 1)] });
      add("step/end", { turn, step });
    }
    add("turn/end", { turn, reason: { kind: "completed" } });
  }
  return log;
}

/** A `WebSocket` stand-in: what the client sends is kept in `sent` (parsed) and passed to
 * `onsend`; `receive` delivers a message from the server. */
export class FakeSocket extends EventTarget {
  constructor(url = "ws://test/acp?token=secret", { open = true } = {}) {
    super();
    this.url = url;
    this.readyState = open ? 1 : 0;
    this.sent = [];
  }

  send(text) {
    if (this.readyState !== 1) throw new Error("not open");
    const message = JSON.parse(text);
    this.sent.push(message);
    this.onsend?.(message);
    this.#waiters = this.#waiters.filter(([count, resolve]) => this.sent.length < count || resolve());
  }

  #waiters = [];

  /** Resolves once the client has sent `count` messages in all. */
  sentCount(count) {
    if (this.sent.length >= count) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push([count, resolve]));
  }

  receive(message) {
    const data = typeof message === "string" ? message : JSON.stringify(message);
    this.dispatchEvent(new MessageEvent("message", { data }));
  }

  open() {
    this.readyState = 1;
    this.dispatchEvent(new Event("open"));
  }

  close(code = 1000, reason = "") {
    if (this.readyState === 3) return;
    this.readyState = 3;
    const event = new Event("close");
    Object.assign(event, { code, reason });
    this.dispatchEvent(event);
  }
}
