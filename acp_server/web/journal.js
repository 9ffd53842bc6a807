// One session's events, gapless (SPEC 3.3), as acp_server/client/journal.py: pages and live
// events checked against what is held and applied, a `Gap` returned where paging must fill in.
//
// Imports the decoder (decode.js); no I/O.

import { HistoryProtocolError, decodeEvent, decodeRecord, decodeRecords } from "./decode.js";

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

/** `value` as Python's `repr` shows it (decode.js words its errors the same way). */
function pyRepr(value) {
  if (typeof value === "string") return value.includes("'") ? `"${value}"` : `'${value}'`;
  if (typeof value === "boolean") return value ? "True" : "False";
  if (value === null) return "None";
  return typeof value === "number" ? String(value) : JSON.stringify(value);
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
