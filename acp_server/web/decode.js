// The history decoder of acp-server's browser client (SPEC 2.1, 3.1): `session.page` and
// `session.follow` records ({event} | {chunks}) expanded to exact events, rows checked by SPEC
// 2.1's rules as the Python codec checks them (acp_server/core/chunk_rows.py, history.py), with
// the same error messages. Events are checked to their envelope (type, seq, time, data,
// ignorable, sourceRange): a known type's data is passed on as sent. Integers a JavaScript
// number cannot hold exactly (beyond 2**53 - 1) are refused in rows rather than rounded.
//
// No imports, no I/O: parsed JSON in, events or a `HistoryProtocolError` out.

export const MAX_SAFE_INTEGER = Number.MAX_SAFE_INTEGER;

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
  "permission/decision",
  "plan/update",
  "session/archived",
  "session/config",
  "session/context",
  "session/forked",
  "session/mode",
  "session/notice",
  "session/rewind",
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
