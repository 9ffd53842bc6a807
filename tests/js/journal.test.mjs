// The browser client's Journal (SPEC 3.3), case for case as tests/test_journal.py pins the
// Python one: covered records dropped, partial overlaps and broken joins refused, malformed
// rows refused, gaps reported as values.
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { HistoryProtocolError } from "../../acp_server/web/decode.js";
import { Gap, Journal } from "../../acp_server/web/journal.js";
import { LOG, chunk, page, randomLog, wire } from "./support.mjs";

/** A journal holding `LOG[first..last]`. */
function journalOf(first, last) {
  return new Journal(structuredClone(LOG.slice(first, last + 1)), { hasOlder: first > 0 });
}

const held = (journal) => [...journal.events];

function refused(run, message) {
  assert.throws(run, (error) => {
    assert.ok(error instanceof HistoryProtocolError, `not a HistoryProtocolError: ${error}`);
    assert.match(error.message, message);
    return true;
  });
}

/** What a client does with a gap: page back from it until the pages reach the tail. */
function repair(log, journal, gap, maxMessages, newer = []) {
  let records = newer;
  while (gap !== null) {
    records = page(log, gap.throughSeq + 1, maxMessages).records.concat(records);
    gap = journal.fillGap(records);
  }
}

function walkOlder(log, journal, maxMessages) {
  while (journal.hasOlder) {
    const { records, hasMore } = page(log, journal.firstSeq, maxMessages);
    journal.prepend(records, hasMore);
  }
}

describe("pages of generated logs", () => {
  for (const seed of [1, 2, 3, 4, 5]) {
    const log = randomLog(seed, 1 + seed * 2);
    for (const maxMessages of [1, 2, 5]) {
      test(`walking every page newest to oldest with prepend gives the log (seed ${seed}, maxMessages ${maxMessages})`, () => {
        const { records, hasMore } = page(log, log.length, maxMessages);
        const journal = Journal.fromPage(records, hasMore);
        walkOlder(log, journal, maxMessages);
        assert.deepEqual(held(journal), log);
        assert.deepEqual([journal.firstSeq, journal.lastSeq, journal.hasOlder], [0, log.length - 1, false]);
      });

      test(`live events with duplicates and drops are repaired by paging to exactly the log (seed ${seed}, maxMessages ${maxMessages})`, () => {
        const cursor = Math.floor(log.length / 3);
        const { records, hasMore } = page(log, cursor + 1, maxMessages);
        const journal = Journal.fromSnapshot(records, cursor, hasMore);
        // Each event after the cursor is dropped, sent once, twice, or followed by an older
        // one sent again; the last is always sent.
        const sent = [];
        log.slice(cursor + 1).forEach((event, k) => {
          const action = (k * 7 + seed) % 4;
          if (action !== 1 || event === log.at(-1)) sent.push(event);
          if (action === 2) sent.push(event);
          if (action === 3 && sent.length) sent.push(sent[(k * 5) % sent.length]);
        });
        for (const event of sent) {
          const gap = journal.applyLive(structuredClone(event));
          if (gap !== null) {
            assert.deepEqual(gap, new Gap(journal.lastSeq, event.seq));
            repair(log, journal, gap, maxMessages);
            assert.equal(journal.applyLive(event), null);
          }
        }
        assert.deepEqual(held(journal), log.slice(journal.firstSeq));
        walkOlder(log, journal, maxMessages);
        assert.deepEqual(held(journal), log);
      });
    }
  }
});

describe("starting", () => {
  test("a snapshot holds its page and has older events when it starts after seq 0", () => {
    const journal = Journal.fromSnapshot(wire(LOG.slice(9)), 11, true);
    assert.deepEqual([journal.firstSeq, journal.lastSeq, journal.hasOlder], [9, 11, true]);
    assert.deepEqual(held(journal), LOG.slice(9));
  });

  test("the snapshot of an empty session is an empty journal at seq 0", () => {
    const journal = Journal.fromSnapshot([], -1, false);
    assert.deepEqual([journal.firstSeq, journal.lastSeq, journal.hasOlder, journal.length], [0, -1, false, 0]);
  });

  test("a snapshot that does not end at its cursor is refused", () => {
    refused(() => Journal.fromSnapshot(wire(LOG.slice(9, 11)), 11, true), /ends at seq 10, not at its cursor 11/);
  });

  test("a page that starts after seq 0 but says nothing is before it is refused", () => {
    refused(() => Journal.fromPage(wire(LOG.slice(9)), false), /starts at seq 9 but says there is nothing before it/);
  });

  test("a page that starts at seq 0 but says there is more is refused", () => {
    refused(() => Journal.fromPage(wire(LOG), true), /starts at seq 0 but says there is more before it/);
  });

  test("an empty page with more before it is refused", () => {
    refused(() => Journal.fromPage([], true), /empty page/);
  });
});

describe("live events", () => {
  test("the next live event is appended", () => {
    const journal = journalOf(0, 9);
    assert.equal(journal.applyLive(structuredClone(LOG[10])), null);
    assert.deepEqual(held(journal), LOG.slice(0, 11));
  });

  test("a live event already held is dropped", () => {
    const journal = journalOf(0, 9);
    assert.equal(journal.applyLive(structuredClone(LOG[4])), null);
    assert.deepEqual(held(journal), LOG.slice(0, 10));
  });

  test("a live event after a gap is reported and not appended", () => {
    const journal = journalOf(0, 5);
    assert.deepEqual(journal.applyLive(LOG[9]), new Gap(5, 9));
    assert.deepEqual(held(journal), LOG.slice(0, 6));
  });

  test("a gap is repaired by the page through the seq before the live event", () => {
    const journal = journalOf(0, 5);
    const gap = journal.applyLive(LOG[10]);
    assert.equal(gap.throughSeq, 9);
    // The page through seq 9 is message-aligned: it starts at seq 3, inside what is held.
    assert.equal(journal.fillGap(wire(LOG.slice(3, 10))), null);
    assert.equal(journal.applyLive(LOG[10]), null);
    assert.deepEqual(held(journal), LOG.slice(0, 11));
  });

  test("a live event that differs from the one held under its seq is refused", () => {
    const journal = journalOf(0, 9);
    refused(() => journal.applyLive(chunk(4, "Hé")), /seq 4 was sent again as a different event/);
  });

  test("a live event older than the journal is refused", () => {
    const journal = journalOf(9, 11);
    refused(() => journal.applyLive(LOG[4]), /live event seq 4 is older than the journal's first seq 9/);
  });

  test("dropping after a seq keeps the events through it and the next one continues", () => {
    const journal = journalOf(3, 9);
    journal.dropAfter(6);
    assert.deepEqual(held(journal), LOG.slice(3, 7));
    assert.equal(journal.applyLive(chunk(7, "again")), null);
    assert.equal(journal.lastSeq, 7);
    assert.deepEqual(journal.eventAt(7), chunk(7, "again"));
  });

  test("dropping after the seq before the first empties the journal", () => {
    const journal = journalOf(3, 9);
    journal.dropAfter(2);
    assert.deepEqual([held(journal), journal.firstSeq, journal.lastSeq], [[], 3, 2]);
  });

  test("dropping after a seq older than the journal is refused", () => {
    const journal = journalOf(3, 9);
    refused(() => journal.dropAfter(1), /^cannot drop the events after seq 1: the journal starts at 3$/);
    assert.deepEqual(held(journal), LOG.slice(3, 10));
  });

  test("a malformed live event is refused", () => {
    const journal = journalOf(0, 9);
    refused(
      () => journal.applyLive({ type: "turn/end", seq: 10, time: 0, data: { turn: 0 }, extra: 1 }),
      /^live event: Object contains unknown field `extra`$/,
    );
    assert.deepEqual(held(journal), LOG.slice(0, 10));
  });
});

describe("records at the tail", () => {
  test("records after the tail are appended", () => {
    const journal = journalOf(0, 2);
    assert.equal(journal.applyRecords(wire(LOG.slice(3))), null);
    assert.deepEqual(held(journal), LOG);
  });

  test("records wholly covered are dropped", () => {
    const journal = journalOf(0, 9);
    assert.equal(journal.applyRecords(wire(LOG.slice(3, 9))), null); // one row, inside
    assert.deepEqual(held(journal), LOG.slice(0, 10));
  });

  test("a row overlapping the tail in part is a protocol error", () => {
    const journal = journalOf(0, 5); // holds chunks 3..5 of the row 3..8
    refused(() => journal.applyRecords(wire(LOG.slice(3))), /^records\[0\] \(seqs 3..8\) overlaps the journal \(0..5\) in part$/);
    assert.deepEqual(held(journal), LOG.slice(0, 6));
  });

  test("records starting after a gap report it and change nothing", () => {
    const journal = journalOf(0, 2);
    assert.deepEqual(journal.applyRecords(wire(LOG.slice(9))), new Gap(2, 9));
    assert.deepEqual(held(journal), LOG.slice(0, 3));
  });

  test("records older than the journal are refused", () => {
    const journal = journalOf(9, 11);
    refused(() => journal.applyRecords(wire(LOG.slice(0, 2))), /older than the journal's first seq 9/);
  });

  test("records that are not contiguous are refused", () => {
    const journal = journalOf(0, 2);
    refused(() => journal.applyRecords([...wire(LOG.slice(3, 9)), ...wire(LOG.slice(10))]), /seq 10 follows seq 8/);
    assert.deepEqual(held(journal), LOG.slice(0, 3));
  });
});

describe("repairing gaps", () => {
  test("fillGap takes a page event by event where records would overlap in part", () => {
    const journal = journalOf(0, 5);
    assert.equal(journal.fillGap(wire(LOG.slice(3))), null);
    assert.deepEqual(held(journal), LOG);
  });

  test("fillGap with a page that does not reach the tail reports the gap", () => {
    const journal = journalOf(0, 2);
    assert.deepEqual(journal.fillGap(wire(LOG.slice(9))), new Gap(2, 9));
    assert.deepEqual(held(journal), LOG.slice(0, 3));
  });

  test("fillGap with older pages first reaches the tail", () => {
    const journal = journalOf(0, 1);
    assert.equal(journal.fillGap([...wire(LOG.slice(2, 9)), ...wire(LOG.slice(9))]), null);
    assert.deepEqual(held(journal), LOG);
  });

  test("fillGap refuses a page that differs from what is held", () => {
    const journal = journalOf(0, 5);
    const changed = [...LOG.slice(3, 5), chunk(5, "X"), ...LOG.slice(6)];
    refused(() => journal.fillGap(wire(changed)), /seq 5 was sent again as a different event/);
    assert.deepEqual(held(journal), LOG.slice(0, 6));
  });
});

describe("older pages at the head", () => {
  test("an older page that joins the head is prepended", () => {
    const journal = journalOf(9, 11);
    assert.deepEqual(journal.prepend(wire(LOG.slice(3, 9)), true), LOG.slice(3, 9));
    assert.deepEqual([journal.firstSeq, journal.hasOlder], [3, true]);
    journal.prepend(wire(LOG.slice(0, 3)), false);
    assert.deepEqual(held(journal), LOG);
    assert.equal(journal.hasOlder, false);
  });

  test("the seqs and events held stay right while pages are prepended before they are read", () => {
    const journal = journalOf(10, 11);
    journal.prepend(wire(LOG.slice(9, 10)), true);
    journal.prepend(wire(LOG.slice(3, 9)), true);
    assert.deepEqual([journal.firstSeq, journal.lastSeq, journal.length], [3, 11, 9]);
    assert.equal(journal.applyLive(LOG[5]), null); // held, inside a prepended page
    journal.prepend(wire(LOG.slice(0, 3)), false);
    assert.deepEqual(journal.eventAt(4), LOG[4]);
    assert.deepEqual(journal.eventsAfter(8), LOG.slice(9));
    assert.deepEqual(held(journal), LOG);
  });

  test("an older page overlapping the head is refused", () => {
    const journal = journalOf(9, 11);
    refused(() => journal.prepend(wire(LOG.slice(3, 10)), true), /ends at seq 9: it overlaps the journal's first seq 9/);
    assert.deepEqual(held(journal), LOG.slice(9));
  });

  test("an older page leaving a gap before the head is refused", () => {
    const journal = journalOf(9, 11);
    refused(() => journal.prepend(wire(LOG.slice(3, 8)), true), /ends at seq 7: it leaves a gap before the journal's first seq 9/);
    assert.deepEqual(held(journal), LOG.slice(9));
  });

  test("a last older page that does not start at seq 0 is refused", () => {
    const journal = journalOf(9, 11);
    refused(() => journal.prepend(wire(LOG.slice(3, 9)), false), /starts at seq 3 but says there is nothing before it/);
    assert.deepEqual(held(journal), LOG.slice(9));
  });

  test("an older page when nothing is older is refused", () => {
    const journal = journalOf(0, 11);
    refused(() => journal.prepend(wire(LOG.slice(0, 1)), false), /nothing is older than seq 0/);
  });

  test("an empty older page is refused", () => {
    const journal = journalOf(9, 11);
    refused(() => journal.prepend([], false), /empty older page/);
  });
});

describe("malformed records", () => {
  /** LOG[3..8] as its one wire row, with `changes` applied to the row. */
  function row(changes = {}) {
    const [record] = wire(LOG.slice(3, 9));
    Object.assign(record.chunks, changes);
    return record;
  }
  const data = row().chunks.data;
  const MALFORMED = {
    "neither event nor chunks": { rows: [1] },
    "both event and chunks": { ...wire(LOG.slice(3, 4))[0], ...row() },
    "not an object": ["event"],
    "row with too few dt": row({ data: { ...data, dt: [1] } }),
    "row with a negative seq0": row({ seq0: -1 }),
    "row with an extra key": row({ extra: 1 }),
    "row with empty texts": row({ data: { ...data, texts: [], dt: [] } }),
    "row with an unknown tag": row({ type: "text/chunks" }),
    "event without a seq": { event: { type: "turn/start", time: 0, data: { turn: 0 } } },
    "unknown event not ignorable": { event: { type: "future/x", seq: 3, time: 0, data: {} } },
  };
  for (const [name, record] of Object.entries(MALFORMED)) {
    for (const method of ["applyRecords", "fillGap", "fromPage", "prepend"]) {
      test(`a malformed record is a protocol error and changes nothing: ${name}, ${method}`, () => {
        const journal = method === "prepend" ? journalOf(9, 11) : journalOf(0, 2);
        const before = held(journal);
        const records = [...wire(LOG.slice(2, 3)), record];
        refused(() => {
          if (method === "fromPage") Journal.fromPage(records, true);
          else if (method === "prepend") journal.prepend(records, true);
          else journal[method](records);
        }, /^records\[1\]/);
        assert.deepEqual(held(journal), before);
      });
    }
  }
});
