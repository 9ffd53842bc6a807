// The browser client's decoder on the Python codec's vectors (tests/vectors/chunk_rows.json,
// made by tests/chunk_row_vectors.py): the same events out, the same refusals, and the server's
// own pages of a log stitched back into the log.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import {
  HistoryProtocolError,
  KNOWN_EVENT_TYPES,
  decodeEvent,
  decodeRecords,
} from "../../acp_server/web/decode.js";
import { Journal } from "../../acp_server/web/journal.js";

const VECTORS = JSON.parse(
  readFileSync(new URL("../vectors/chunk_rows.json", import.meta.url), "utf-8"),
);

function refusal(records) {
  try {
    decodeRecords(records);
  } catch (error) {
    assert.ok(error instanceof HistoryProtocolError, `not a HistoryProtocolError: ${error}`);
    return error.message;
  }
  assert.fail("the records were decoded");
}

test("the known event types are the Python codec's", () => {
  assert.deepEqual([...KNOWN_EVENT_TYPES].sort(), VECTORS.knownEventTypes);
});

for (const vector of VECTORS.decodes) {
  test(`decodes to the exact events: ${vector.name}`, () => {
    assert.deepEqual(decodeRecords(vector.records), vector.events);
  });
}

for (const vector of VECTORS.refuses) {
  test(`refuses with the Python codec's message: ${vector.name}`, () => {
    assert.equal(refusal(vector.records), vector.error);
  });
}

for (const vector of VECTORS.beyondJavaScript) {
  test(`refuses an integer a JavaScript number cannot hold: ${vector.name}`, () => {
    assert.match(
      refusal(vector.records),
      /^records\[0\]: [a-z-]+ row \(seq0=3\): Expected `int` within \+-9007199254740991, the integers a JavaScript number holds exactly - at `\$\.data\.(turn|index|dt\[0\])`$/,
    );
  });
}

test("decoded members keep their key order: type, seq, time, data", () => {
  const [, , , , row] = VECTORS.decodes[1].records;
  const [first] = decodeRecords([row]);
  assert.deepEqual(Object.keys(first), ["type", "seq", "time", "data"]);
  assert.deepEqual(Object.keys(first.data.chunk), ["type", "index", "text"]);
});

test("the vectors hold astral characters, which decode as sent", () => {
  const events = decodeRecords(VECTORS.decodes[7].records);
  assert.deepEqual(
    events.slice(0, 2).map((event) => event.data.chunk.text),
    ["\u{1F600}", "\u{1D11E} clef"],
  );
});

test("records that are not an array are refused", () => {
  assert.throws(() => decodeRecords({}), new HistoryProtocolError("records: not an array"));
});

test("a live event is checked and named as live", () => {
  assert.throws(
    () => decodeEvent({ type: "turn/start", seq: -1, time: 0, data: { turn: 0 } }, "live event"),
    new HistoryProtocolError("live event: Expected `int` >= 0 - at `$.seq`"),
  );
});

for (const vector of VECTORS.paged) {
  test(`a journal of the first page with every older page prepended holds the log: ${vector.name}`, () => {
    const [first, ...older] = vector.pages;
    const journal = Journal.fromPage(first.records, first.hasMore);
    for (const page of older) journal.prepend(page.records, page.hasMore);
    assert.deepEqual(journal.events, vector.events);
    assert.equal(journal.hasOlder, false);
  });
}
