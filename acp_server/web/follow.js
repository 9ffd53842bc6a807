// Following a session (SPEC 3.2) for acp-server's browser client, as
// acp_server/client/follow.py: `session.follow` kept gapless across overflows and rewinds in a
// `Journal`, older history paged in by `loadOlder`.
//
// Imports the journal (journal.js), the decoder's error (decode.js) and the connection's
// errors (connection.js).

import { ConnectionClosed, INVALID_PARAMS, RpcError } from "./connection.js";
import { HistoryProtocolError } from "./decode.js";
import { Journal } from "./journal.js";

export const DEFAULT_MAX_MESSAGES = 50;

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
