// acp-server's browser client (SPEC 3): the history API of a session, over a WebSocket.
//
// Served by `acp-server serve` at /client.js as one ES module without dependencies:
//
// - `decodeRecords`: `session.page` / `session.follow` records ({event} | {chunks}) expanded to
//   exact events, rows checked by SPEC 2.1's rules as the Python codec checks them
//   (acp_server/core/chunk_rows.py, history.py), with the same error messages. Events are
//   checked to their envelope (type, seq, time, data, ignorable, sourceRange): a known type's
//   data is passed on as sent. Integers a JavaScript number cannot hold exactly (beyond
//   2**53 - 1) are refused in rows rather than rounded.
// - `Journal`: one session's events, gapless (SPEC 3.3), as acp_server/client/journal.py.
// - `AcpConnection`: JSON-RPC 2.0, one message per text frame, over a WebSocket.
// - `Follow`: `session.follow` kept gapless across overflows and rewinds, as
//   acp_server/client/follow.py; older history paged in by `loadOlder`.

export const MAX_SAFE_INTEGER = Number.MAX_SAFE_INTEGER;
export const DEFAULT_MAX_MESSAGES = 50;
export const METHOD_NOT_FOUND = -32601;
export const INVALID_PARAMS = -32602;

/** The server sent history that breaks SPEC 3: a malformed record, a gap, an overlap. */
export class HistoryProtocolError extends Error {
  constructor(message) {
    super(message);
    this.name = "HistoryProtocolError";
  }
}

/** The event types a reader knows (SPEC 1.2); any other type must be marked ignorable. */
export const KNOWN_EVENT_TYPES = new Set([
  "assistant/chunk",
  "assistant/message",
  "command/result",
  "context/compaction",
  "plan/update",
  "session/config",
  "session/mode",
  "session/title",
  "step/end",
  "step/start",
  "subagent/start",
  "tool/call",
  "tool/result",
  "turn/end",
  "turn/start",
  "user/message",
]);

// ---------------------------------------------------------------------------------------------
// Checking parsed JSON, worded as msgspec words it on the Python side.

/** A value breaks a rule; `message` is msgspec's wording (the caller names the record). */
class Invalid extends Error {}

function invalid(message, path) {
  throw new Invalid(path === "$" ? message : `${message} - at \`${path}\``);
}

function kindOf(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  switch (typeof value) {
    case "string":
      return "str";
    case "boolean":
      return "bool";
    case "number":
      return Number.isInteger(value) ? "int" : "float";
    default:
      return "object";
  }
}

function expect(value, kind, path) {
  const got = kindOf(value);
  if (got !== kind) invalid(`Expected \`${kind}\`, got \`${got}\``, path);
}

function int(value, path, min = -Infinity, max = Infinity) {
  expect(value, "int", path);
  if (value < min) invalid(`Expected \`int\` >= ${min}`, path);
  if (value > max) invalid(`Expected \`int\` <= ${max}`, path);
}

const seq = (value, path) => int(value, path, 0, MAX_SAFE_INTEGER);
const safeInt = (value, path) => int(value, path, -MAX_SAFE_INTEGER, MAX_SAFE_INTEGER);
const str = (value, path) => expect(value, "str", path);
const any = () => {};

/** An integer Python takes whole, which a JavaScript number holds exactly only when safe. */
function exactInt(value, path) {
  expect(value, "int", path);
  if (!Number.isSafeInteger(value)) {
    invalid(
      `Expected \`int\` within +-${MAX_SAFE_INTEGER}, ` +
        "the integers a JavaScript number holds exactly",
      path,
    );
  }
}

/** An array whose items pass `ok`; `check` words the refusal of one that does not (paths
 * are only built for an error: a row's members are checked by the hundred thousand). */
function arrayOf(ok, check, minLength = 0) {
  return (value, path) => {
    expect(value, "array", path);
    if (value.length < minLength) invalid(`Expected \`array\` of length >= ${minLength}`, path);
    for (let i = 0; i < value.length; i++) if (!ok(value[i])) check(value[i], `${path}[${i}]`);
  };
}

const isString = (value) => typeof value === "string";

/** An object whose keys are `checks`' (each checked), with every `required` key present. */
function object(value, path, checks, required) {
  expect(value, "object", path);
  for (const key of Object.keys(value)) {
    if (!Object.hasOwn(checks, key)) invalid(`Object contains unknown field \`${key}\``, path);
    checks[key](value[key], `${path}.${key}`);
  }
  for (const key of required) {
    if (!Object.hasOwn(value, key)) invalid(`Object missing required field \`${key}\``, path);
  }
}

/** `value` as Python's `repr` shows it, for the JSON values an error may quote. */
function pyRepr(value) {
  if (typeof value === "string") return value.includes("'") ? `"${value}"` : `'${value}'`;
  if (typeof value === "boolean") return value ? "True" : "False";
  if (value === null) return "None";
  return typeof value === "number" ? String(value) : JSON.stringify(value);
}

// ---------------------------------------------------------------------------------------------
// Decoding records.

const ROW_CHUNK_TYPES = {
  "text-chunks": "text-delta",
  "reasoning-chunks": "reasoning-delta",
  "tool-call-chunks": "tool-call-delta",
};

const TEXT_DATA = {
  turn: exactInt,
  step: exactInt,
  index: exactInt,
  dt: arrayOf(Number.isSafeInteger, exactInt),
  texts: arrayOf(isString, str, 1),
};
const TOOL_DATA = {
  turn: exactInt,
  step: exactInt,
  index: exactInt,
  dt: arrayOf(Number.isSafeInteger, exactInt),
  id: str,
  name: str,
  args: arrayOf(isString, str, 1),
};
const TEXT_REQUIRED = ["turn", "step", "index", "dt", "texts"];
const TOOL_REQUIRED = ["turn", "step", "index", "dt", "id", "args"];

const TEXT_ROW = {
  type: any,
  seq0: seq,
  time0: safeInt,
  data: (value, path) => object(value, path, TEXT_DATA, TEXT_REQUIRED),
};
const TOOL_ROW = {
  ...TEXT_ROW,
  data: (value, path) => object(value, path, TOOL_DATA, TOOL_REQUIRED),
};
const ROW_REQUIRED = ["seq0", "time0", "data"];

/** How an error names a row: its type and first seq, as far as they can be read. */
function rowName(value) {
  if (kindOf(value) !== "object") return "chunk row";
  const type = Object.hasOwn(value, "type") ? value.type : "chunk";
  const seq0 = Object.hasOwn(value, "seq0") ? value.seq0 : "?";
  return `${typeof type === "string" ? type : pyRepr(type)} row (seq0=${pyRepr(seq0)})`;
}

function checkRowShape(row) {
  expect(row, "object", "$");
  if (!Object.hasOwn(row, "type")) invalid("Object missing required field `type`", "$");
  str(row.type, "$.type");
  if (!Object.hasOwn(ROW_CHUNK_TYPES, row.type)) {
    invalid(`Invalid value ${pyRepr(row.type)}`, "$.type");
  }
  const tool = row.type === "tool-call-chunks";
  object(row, "$", tool ? TOOL_ROW : TEXT_ROW, ROW_REQUIRED);
}

/** The members' times, checked by SPEC 2.1: `dt`'s length, safe seqs and times. */
function memberTimes(row, count) {
  const { dt } = row.data;
  if (dt.length !== count - 1) invalid(`dt has ${dt.length} entries, expected ${count - 1}`, "$");
  // Not `seq0 + count - 1 > MAX`: `seq0 + count` may already round down past 2**53.
  if (row.seq0 > MAX_SAFE_INTEGER - (count - 1)) {
    invalid("last member's seq leaves the safe-integer range", "$");
  }
  // Every gap and every time before it is safe, so each sum is exact until one leaves the
  // safe range, and a sum beyond it never rounds back inside.
  const times = new Array(count);
  let time = row.time0;
  times[0] = time;
  for (let k = 1; k < count; k++) {
    time += dt[k - 1];
    if (time > MAX_SAFE_INTEGER || time < -MAX_SAFE_INTEGER) {
      invalid("a member's time leaves the safe-integer range", "$");
    }
    times[k] = time;
  }
  return times;
}

/** The exact events a chunk row stands for; throws `Invalid` naming the row. */
function expandRow(row) {
  let times;
  try {
    checkRowShape(row);
    times = memberTimes(row, (row.data.texts ?? row.data.args).length);
  } catch (error) {
    if (error instanceof Invalid) throw new Invalid(`${rowName(row)}: ${error.message}`);
    throw error;
  }
  const { turn, step, index } = row.data;
  const type = ROW_CHUNK_TYPES[row.type];
  const events = new Array(times.length);
  if (row.type === "tool-call-chunks") {
    const { id, args } = row.data;
    const named = Object.hasOwn(row.data, "name");
    for (let k = 0; k < args.length; k++) {
      const chunk = named
        ? { type, index, id, argumentsDelta: args[k], name: row.data.name }
        : { type, index, id, argumentsDelta: args[k] };
      events[k] = chunkEvent(row.seq0 + k, times[k], turn, step, chunk);
    }
  } else {
    const { texts } = row.data;
    for (let k = 0; k < texts.length; k++) {
      events[k] = chunkEvent(row.seq0 + k, times[k], turn, step, { type, index, text: texts[k] });
    }
  }
  return events;
}

function chunkEvent(seq, time, turn, step, chunk) {
  return { type: "assistant/chunk", seq, time, data: { turn, step, chunk } };
}

const ENVELOPE = {
  type: any,
  seq,
  time: safeInt,
  data: (value, path) => expect(value, "object", path),
  ignorable: (value, path) => {
    expect(value, "bool", path);
    if (value !== true) invalid("Invalid enum value False", path);
  },
  sourceRange: (value, path) => {
    expect(value, "array", path);
    if (value.length !== 2) invalid(`Expected \`array\` of length 2, got ${value.length}`, path);
    seq(value[0], `${path}[0]`);
    seq(value[1], `${path}[1]`);
  },
};
const UNKNOWN_ENVELOPE = { ...ENVELOPE, data: any };
const EVENT_REQUIRED = ["seq", "time", "data"];

/** Check one event's envelope (SPEC 1.1); throws `Invalid`. */
function checkEvent(event) {
  expect(event, "object", "$");
  if (!Object.hasOwn(event, "type")) invalid("Object missing required field `type`", "$");
  str(event.type, "$.type");
  if (KNOWN_EVENT_TYPES.has(event.type)) {
    object(event, "$", ENVELOPE, EVENT_REQUIRED);
  } else if (event.ignorable === true && Object.hasOwn(event, "ignorable")) {
    object(event, "$", UNKNOWN_ENVELOPE, EVENT_REQUIRED);
  } else {
    throw new Invalid(`unknown event type ${pyRepr(event.type)} (not marked ignorable)`);
  }
}

/** One event (a `session.event` frame's), checked; throws `HistoryProtocolError`. */
export function decodeEvent(event, context = "event") {
  try {
    checkEvent(event);
  } catch (error) {
    if (error instanceof Invalid) throw new HistoryProtocolError(`${context}: ${error.message}`);
    throw error;
  }
  return event;
}

/** The exact events one record stands for: `[event]`, or a row's members. `index` is the
 * record's position, named in the `HistoryProtocolError` it may throw. */
export function decodeRecord(record, index = 0) {
  const keys = kindOf(record) === "object" ? Object.keys(record) : [];
  if (keys.length !== 1 || (keys[0] !== "event" && keys[0] !== "chunks")) {
    throw new HistoryProtocolError(`records[${index}]: not {event} or {chunks}`);
  }
  try {
    if (keys[0] === "event") {
      checkEvent(record.event);
      return [record.event];
    }
    return expandRow(record.chunks);
  } catch (error) {
    if (!(error instanceof Invalid)) throw error;
    throw new HistoryProtocolError(`records[${index}]: ${error.message}`);
  }
}

/** The exact events a page's records stand for, every row expanded and checked. A malformed
 * record throws a `HistoryProtocolError`, and nothing is returned. */
export function decodeRecords(records) {
  if (!Array.isArray(records)) throw new HistoryProtocolError("records: not an array");
  const events = [];
  for (let i = 0; i < records.length; i++) {
    const span = decodeRecord(records[i], i);
    for (let k = 0; k < span.length; k++) events.push(span[k]);
  }
  return events;
}

// ---------------------------------------------------------------------------------------------
// The journal.

/** The events after `afterSeq` and before `beforeSeq` are missing: page them with
 * `throughSeq` and pass the records to `Journal.fillGap`. */
export class Gap {
  constructor(afterSeq, beforeSeq) {
    this.afterSeq = afterSeq;
    this.beforeSeq = beforeSeq;
  }

  get throughSeq() {
    return this.beforeSeq - 1;
  }
}

/** Whether two parsed JSON values are equal (objects whatever their key order). */
function sameJson(a, b) {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  return keys.every((key) => Object.hasOwn(b, key) && sameJson(a[key], b[key]));
}

function checkContiguous(events) {
  for (let i = 1; i < events.length; i++) {
    if (events[i].seq !== events[i - 1].seq + 1) {
      throw new HistoryProtocolError(
        `seq ${events[i].seq} follows seq ${events[i - 1].seq}: records must be contiguous`,
      );
    }
  }
}

function checkHasOlder(firstSeq, hasOlder) {
  if (hasOlder !== firstSeq > 0) {
    const claim = hasOlder ? "more before it" : "nothing before it";
    throw new HistoryProtocolError(`the page starts at seq ${firstSeq} but says there is ${claim}`);
  }
}

function expand(records) {
  const events = decodeRecords(records);
  checkContiguous(events);
  return events;
}

/**
 * One session's events from `firstSeq` through `lastSeq`, every seq once (SPEC 3.3), without
 * I/O: each method checks what the server sent against what is held, applies it or throws a
 * `HistoryProtocolError` (leaving the journal as it was), and returns a `Gap` to page or null.
 */
export class Journal {
  #events; // the held events from #firstSeq, less those still in #older
  #older = []; // pages prepended since #events was last joined, newest first
  #olderLength = 0;
  #firstSeq;
  #hasOlder;

  /** A journal holding `events` (contiguous seqs); `hasOlder`: the session holds events before
   * the first of them. With no events, it starts at seq 0. */
  constructor(events = [], { hasOlder = false } = {}) {
    checkContiguous(events);
    this.#events = [...events];
    this.#firstSeq = events.length ? events[0].seq : 0;
    this.#hasOlder = hasOlder;
    checkHasOlder(this.#firstSeq, hasOlder);
  }

  /** A journal holding one `session.page` result: its `records` and `hasMore`. */
  static fromPage(records, hasMore) {
    const events = decodeRecords(records); // the constructor checks that they are contiguous
    if (!events.length && hasMore) {
      throw new HistoryProtocolError("an empty page cannot have more before it");
    }
    return new Journal(events, { hasOlder: hasMore });
  }

  /** A journal holding a `session.follow` result, whose page must end at its `cursor`. */
  static fromSnapshot(records, cursor, hasMore) {
    const journal = Journal.fromPage(records, hasMore);
    if (journal.lastSeq !== cursor) {
      throw new HistoryProtocolError(
        `the snapshot ends at seq ${journal.lastSeq}, not at its cursor ${cursor}`,
      );
    }
    return journal;
  }

  /** Every event held, in seq order (the journal's own array: do not modify it). */
  get events() {
    if (this.#older.length) {
      this.#events = this.#older.reverse().concat([this.#events]).flat();
      this.#older = [];
      this.#olderLength = 0;
    }
    return this.#events;
  }

  /** The seq of the first event held (0 when the journal is empty). */
  get firstSeq() {
    return this.#firstSeq;
  }

  /** The seq of the last event held (`firstSeq - 1` when the journal is empty). */
  get lastSeq() {
    return this.#firstSeq + this.#olderLength + this.#events.length - 1;
  }

  /** The session holds events before `firstSeq`: page them with `beforeSeq = firstSeq`. */
  get hasOlder() {
    return this.#hasOlder;
  }

  get length() {
    return this.lastSeq - this.#firstSeq + 1;
  }

  /** The held event with this seq. */
  eventAt(seq) {
    if (!this.#holds(seq)) {
      throw new RangeError(
        `seq ${seq} is not held (the journal holds ${this.firstSeq}..${this.lastSeq})`,
      );
    }
    return this.events[seq - this.#firstSeq];
  }

  /** The held events after `seq`, in order (a new array). */
  eventsAfter(seq) {
    return this.events.slice(Math.max(0, seq + 1 - this.#firstSeq));
  }

  /** Add one live event (a `session.event` frame's). One already held is dropped; the next
   * is appended; one after a gap is not: the gap is returned, to be paged before it. */
  applyLive(value) {
    const event = decodeEvent(value, "live event");
    if (event.seq < this.#firstSeq) {
      throw new HistoryProtocolError(
        `live event seq ${event.seq} is older than the journal's first seq ${this.#firstSeq}`,
      );
    }
    if (this.#holds(event.seq)) {
      this.#checkSame([event]);
      return null;
    }
    if (event.seq > this.lastSeq + 1) return new Gap(this.lastSeq, event.seq);
    this.#events.push(event);
    return null;
  }

  /** Add records (contiguous, in order) at the tail, record by record: one wholly held is
   * dropped, one held in part is a protocol error, and the first one not held must start right
   * after `lastSeq`, else nothing is added and the gap is returned. */
  applyRecords(records) {
    const spans = records.map((record, index) => decodeRecord(record, index));
    checkContiguous(spans.flat());
    const fresh = [];
    for (let index = 0; index < spans.length; index++) {
      const span = spans[index];
      const first = span[0].seq;
      const last = span[span.length - 1].seq;
      if (fresh.length) {
        fresh.push(...span);
      } else if (span.every((event) => this.#holds(event.seq))) {
        this.#checkSame(span);
      } else if (last < this.#firstSeq) {
        throw new HistoryProtocolError(
          `records[${index}] (seqs ${first}..${last}) is older than the journal's first seq ` +
            `${this.#firstSeq}: older pages are prepended`,
        );
      } else if (first <= this.lastSeq) {
        throw new HistoryProtocolError(
          `records[${index}] (seqs ${first}..${last}) overlaps the journal ` +
            `(${this.#firstSeq}..${this.lastSeq}) in part`,
        );
      } else if (first > this.lastSeq + 1) {
        return new Gap(this.lastSeq, first);
      } else {
        fresh.push(...span);
      }
    }
    for (const event of fresh) this.#events.push(event);
    return null;
  }

  /** Add what a page (or several, oldest first) holds after `lastSeq`, event by event. The
   * page must reach back to `lastSeq + 1`; if it does not, nothing is added and the remaining
   * gap is returned: page further back and pass the older records first. */
  fillGap(pageRecords) {
    const events = expand(pageRecords);
    if (!events.length) return null;
    if (events[0].seq > this.lastSeq + 1) return new Gap(this.lastSeq, events[0].seq);
    this.#checkSame(events.filter((event) => this.#holds(event.seq)));
    const last = this.lastSeq;
    for (const event of events) if (event.seq > last) this.#events.push(event);
    return null;
  }

  /** Forget the events after `seq`: the server said they were never stored (a follow ended
   * "rewound"). Events at or before `seq` stay. */
  dropAfter(seq) {
    if (!Number.isInteger(seq) || seq < this.#firstSeq - 1) {
      throw new HistoryProtocolError(
        `cannot drop the events after seq ${pyRepr(seq)}: the journal starts at ${this.#firstSeq}`,
      );
    }
    const events = this.events;
    events.length = Math.min(events.length, seq + 1 - this.#firstSeq);
  }

  /** Add the next older page (asked for with `beforeSeq = firstSeq`) before the head: it must
   * end at `firstSeq - 1`. Its `hasMore` becomes `hasOlder`; without more, it must start at 0.
   * Returns the events prepended. */
  prepend(pageRecords, hasMore) {
    const events = expand(pageRecords);
    if (!this.#hasOlder) {
      throw new HistoryProtocolError(
        `an older page, but nothing is older than seq ${this.#firstSeq}`,
      );
    }
    if (!events.length) {
      throw new HistoryProtocolError(
        `an empty older page, but events before seq ${this.#firstSeq} exist`,
      );
    }
    const last = events[events.length - 1].seq;
    if (last !== this.#firstSeq - 1) {
      const problem = last >= this.#firstSeq ? "overlaps" : "leaves a gap before";
      throw new HistoryProtocolError(
        `the older page ends at seq ${last}: ` +
          `it ${problem} the journal's first seq ${this.#firstSeq}`,
      );
    }
    checkHasOlder(events[0].seq, hasMore);
    // Joined when `events` is next read: prepending page after page stays linear.
    this.#older.push(events);
    this.#olderLength += events.length;
    this.#firstSeq = events[0].seq;
    this.#hasOlder = hasMore;
    return events;
  }

  #holds(seq) {
    return this.#firstSeq <= seq && seq <= this.lastSeq;
  }

  /** A log is append-only: an event sent again under a held seq must be the one held. */
  #checkSame(events) {
    for (const event of events) {
      if (!sameJson(this.eventAt(event.seq), event)) {
        throw new HistoryProtocolError(`seq ${event.seq} was sent again as a different event`);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// JSON-RPC over a WebSocket.

/** A JSON-RPC error answer. */
export class RpcError extends Error {
  constructor(code, message, data) {
    super(message);
    this.name = "RpcError";
    this.code = code;
    this.data = data;
  }
}

/** The connection has closed: no answer will come. */
export class ConnectionClosed extends Error {
  constructor(message) {
    super(message);
    this.name = "ConnectionClosed";
  }
}

/** The URL without its query, which carries the token. */
function shown(url) {
  return String(url).split("?")[0];
}

/**
 * A JSON-RPC 2.0 connection over a WebSocket (one message per text frame). `socket` is a
 * `WebSocket` or anything with its `send`, `close`, `readyState` and `addEventListener`.
 */
export class AcpConnection {
  #socket;
  #nextId = 1;
  #pending = new Map();
  #notificationHandlers = new Map();
  #requestHandlers = new Map();
  #closedError = null;
  #opened;

  constructor(socket) {
    this.#socket = socket;
    let settleClosed;
    /** Resolves with the close event's `{code, reason}` when the connection has closed. */
    this.closed = new Promise((resolve) => (settleClosed = resolve));
    this.#opened = new Promise((resolve, reject) => {
      if (socket.readyState === 1) resolve();
      socket.addEventListener("open", () => resolve());
      socket.addEventListener("close", (event) => {
        const why = event.reason ? `: ${event.reason}` : "";
        const code = event.code ?? "none";
        const error = new ConnectionClosed(`the connection closed (code ${code}${why})`);
        reject(error);
        this.#shut(error);
        settleClosed({ code: event.code, reason: event.reason });
      });
    });
    this.#opened.catch(() => {});
    socket.addEventListener("message", (event) => this.#receive(event.data));
  }

  /** Connect to `url` (its `?token=` authenticates a browser); resolves once it is open.
   * `options.WebSocket` replaces the global `WebSocket` class. */
  static async open(url, { WebSocket: Socket = globalThis.WebSocket } = {}) {
    if (!Socket) throw new ConnectionClosed("no WebSocket implementation");
    const connection = new AcpConnection(new Socket(url));
    try {
      await connection.#opened;
    } catch (error) {
      throw new ConnectionClosed(`could not connect to ${shown(url)}: ${error.message}`);
    }
    return connection;
  }

  /** Send a request; resolves with its result, or rejects with an `RpcError` or
   * `ConnectionClosed`. */
  request(method, params) {
    if (this.#closedError) return Promise.reject(this.#closedError);
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#send(rpcMessage({ id, method }, params));
    });
  }

  /** Send a notification (no answer). */
  notify(method, params) {
    if (this.#closedError) throw this.#closedError;
    this.#send(rpcMessage({ method }, params));
  }

  /** Call `handler(params)` for every notification `method`; returns a function that stops. */
  onNotification(method, handler) {
    return addHandler(this.#notificationHandlers, method, handler);
  }

  /** Answer the server's requests `method` with `await handler(params)` (an `RpcError` it
   * throws is the error answer); a method without a handler is answered -32601. */
  onRequest(method, handler) {
    this.#requestHandlers.set(method, handler);
    return () => this.#requestHandlers.delete(method);
  }

  close() {
    this.#socket.close();
  }

  #send(message) {
    this.#socket.send(JSON.stringify(message));
  }

  #receive(data) {
    let message;
    try {
      message = JSON.parse(data);
    } catch {
      this.#shut(new ConnectionClosed("the server sent a frame that is not JSON"));
      this.#socket.close();
      return;
    }
    for (const one of Array.isArray(message) ? message : [message]) this.#dispatch(one);
  }

  #dispatch(message) {
    if (message === null || typeof message !== "object") return;
    if (typeof message.method === "string") {
      if (Object.hasOwn(message, "id")) this.#answer(message);
      else this.#notify(message);
      return;
    }
    const waiter = this.#pending.get(message.id);
    if (!waiter) return;
    this.#pending.delete(message.id);
    if (message.error) {
      const { code, message: text, data } = message.error;
      waiter.reject(new RpcError(code, text, data));
    } else {
      waiter.resolve(message.result);
    }
  }

  #notify({ method, params }) {
    for (const handler of this.#notificationHandlers.get(method) ?? []) {
      try {
        handler(params);
      } catch (error) {
        console.error(`the ${method} handler failed:`, error);
      }
    }
  }

  async #answer({ id, method, params }) {
    const handler = this.#requestHandlers.get(method);
    let answer;
    try {
      if (!handler) throw new RpcError(METHOD_NOT_FOUND, `Method not found: ${method}`);
      answer = { jsonrpc: "2.0", id, result: (await handler(params)) ?? null };
    } catch (error) {
      const rpc =
        error instanceof RpcError ? error : new RpcError(-32603, String(error?.message ?? error));
      const body = { code: rpc.code, message: rpc.message };
      if (rpc.data !== undefined) body.data = rpc.data;
      answer = { jsonrpc: "2.0", id, error: body };
    }
    if (!this.#closedError) this.#send(answer);
  }

  #shut(error) {
    if (this.#closedError) return;
    this.#closedError = error;
    for (const waiter of this.#pending.values()) waiter.reject(error);
    this.#pending.clear();
  }
}

/** A JSON-RPC 2.0 request (with an `id`) or notification; absent `params` are left out. */
function rpcMessage(fields, params) {
  return params === undefined
    ? { jsonrpc: "2.0", ...fields }
    : { jsonrpc: "2.0", ...fields, params };
}

function addHandler(handlers, method, handler) {
  if (!handlers.has(method)) handlers.set(method, new Set());
  handlers.get(method).add(handler);
  return () => handlers.get(method)?.delete(handler);
}

// ---------------------------------------------------------------------------------------------
// Following a session.

/**
 * A followed session (SPEC 3.2): `journal` and `header` from the snapshot, then every event
 * the journal gains, in seq order and each once, handed to `onEvents(events)`:
 *
 * - a live event after a gap is held back while the gap is paged;
 * - `session.followEnded` "overflow" is answered by following again and paging back until the
 *   new snapshot joins what the journal holds;
 * - "rewound" drops the journal's events after its `lastSeq` (`onRewind(lastSeq)` is told),
 *   then follows again the same way: the events that take those seqs come as new ones;
 * - any other ending, or the connection closing, calls `onEnd(reason)`; broken history calls
 *   `onError(error)` and ends the follow.
 */
export class Follow {
  #frames = [];
  #subscribing = false;
  #draining = false;
  #closed = false;
  #yielded = -1;
  #stop;
  #older = null;
  #listeners;

  constructor(connection, address, { maxMessages = DEFAULT_MAX_MESSAGES, ...listeners } = {}) {
    this.connection = connection;
    this.address = address;
    this.maxMessages = maxMessages;
    this.journal = null;
    this.header = null;
    this.subscriptionId = null;
    /** The `lastSeq` of each overflow and each rewind recovered from; every gap paged. */
    this.overflows = [];
    this.rewinds = [];
    this.repaired = [];
    this.error = null;
    this.#listeners = listeners;
    const stops = ["session.event", "session.followEnded"].map((method) =>
      connection.onNotification(method, (params) => this.#frame(method, params)),
    );
    this.#stop = () => stops.forEach((stop) => stop());
    connection.closed?.then(() => this.#finish("disconnected"));
  }

  /** Follow `address` ({kind: "session", sessionId} or a subagent's) on `connection`.
   * `options`: `maxMessages`, and the listeners `onEvents`, `onRewind`, `onEnd`, `onError`. */
  static async start(connection, address, options = {}) {
    const follow = new Follow(connection, address, options);
    try {
      const result = await follow.#subscribe();
      follow.header = result.header;
      follow.journal = Journal.fromSnapshot(result.records, result.cursor, result.hasMore);
    } catch (error) {
      await follow.close().catch(() => {});
      throw error;
    }
    follow.#yielded = follow.journal.lastSeq;
    follow.#drain();
    return follow;
  }

  /** Prepend the next older page to the journal; resolves with whether older events remain.
   * Calls made while one is paging share its page. */
  loadOlder() {
    if (!this.journal.hasOlder) return Promise.resolve(false);
    this.#older ??= this.#page(this.journal.lastSeq, this.journal.firstSeq)
      .then((page) => {
        this.journal.prepend(page.records, page.hasMore);
        return this.journal.hasOlder;
      })
      .finally(() => (this.#older = null));
    return this.#older;
  }

  /** End the subscription (`session.unfollow`); the journal stays. */
  async close() {
    if (this.#closed) return;
    this.#closed = true;
    this.#frames.length = 0;
    this.#stop();
    const subscriptionId = this.subscriptionId;
    this.subscriptionId = null;
    if (subscriptionId === null) return;
    try {
      await this.connection.request("session.unfollow", { subscriptionId });
    } catch (error) {
      if (error instanceof ConnectionClosed) return;
      // -32602: it had just ended on its own (an overflow on the wire).
      if (!(error instanceof RpcError && error.code === INVALID_PARAMS)) throw error;
    }
  }

  async #subscribe() {
    this.#subscribing = true;
    try {
      const params = { address: this.address, maxMessages: this.maxMessages };
      const result = await this.connection.request("session.follow", params);
      this.subscriptionId = result.subscriptionId;
      return result;
    } finally {
      this.#subscribing = false;
    }
  }

  #page(throughSeq, beforeSeq) {
    const params = { address: this.address, throughSeq, maxMessages: this.maxMessages };
    if (beforeSeq !== undefined) params.beforeSeq = beforeSeq;
    return this.connection.request("session.page", params);
  }

  /** A frame arrived: queue it when it is ours (or may be: a subscription is being made). */
  #frame(method, params) {
    if (this.#closed) return;
    if (this.#subscribing || params?.subscriptionId === this.subscriptionId) {
      this.#frames.push([method, params]);
      this.#drain();
    }
  }

  /** Apply the queued frames one at a time, in order, awaiting any repair between them. */
  async #drain() {
    if (this.#draining || !this.journal) return;
    this.#draining = true;
    try {
      while (this.#frames.length && !this.#closed) {
        const [method, params] = this.#frames.shift();
        if (params?.subscriptionId !== this.subscriptionId) continue; // an ended subscription's
        if (method === "session.event") await this.#applyLive(params.event);
        else await this.#ended(params);
        this.#emit();
      }
    } catch (error) {
      if (error instanceof ConnectionClosed) {
        await this.#finish("disconnected"); // a page asked for while the connection closed
        return;
      }
      this.error = error;
      this.#listeners.onError?.(error);
      await this.#finish("error");
    } finally {
      this.#draining = false;
    }
  }

  #emit() {
    if (this.#closed || this.journal.lastSeq <= this.#yielded) return;
    const events = this.journal.eventsAfter(this.#yielded);
    this.#yielded = this.journal.lastSeq;
    this.#listeners.onEvents?.(events);
  }

  async #applyLive(event) {
    const gap = this.journal.applyLive(event);
    if (gap === null) return;
    await this.#repair(gap, []);
    if (this.journal.applyLive(event) !== null) {
      throw new HistoryProtocolError(`paging through seq ${gap.throughSeq} left a gap`);
    }
  }

  async #ended({ reason, lastSeq }) {
    this.subscriptionId = null;
    if (reason === "rewound") {
      this.rewinds.push(lastSeq);
      this.journal.dropAfter(lastSeq);
      this.#yielded = Math.min(this.#yielded, this.journal.lastSeq);
      this.#listeners.onRewind?.(lastSeq);
    } else if (reason === "overflow") {
      this.overflows.push(lastSeq);
    } else {
      await this.#finish(reason);
      return;
    }
    const result = await this.#subscribe();
    const gap = this.journal.fillGap(result.records);
    if (gap !== null) await this.#repair(gap, result.records);
  }

  /** Page back from `gap.throughSeq` until the pages reach the journal's tail, then fill the
   * gap with them and `newerRecords` (oldest first). */
  async #repair(gap, newerRecords) {
    this.repaired.push(gap);
    let records = newerRecords;
    let missing = gap;
    while (missing !== null) {
      const page = await this.#page(missing.throughSeq);
      if (!page.records.length) {
        throw new HistoryProtocolError(`an empty page through seq ${missing.throughSeq}`);
      }
      records = page.records.concat(records);
      missing = this.journal.fillGap(records);
    }
  }

  async #finish(reason) {
    if (this.#closed) return;
    await this.close().catch(() => {});
    this.#listeners.onEnd?.(reason);
  }
}
