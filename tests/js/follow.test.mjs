// The browser client's Follow (SPEC 3.2, 3.3) against a stand-in server that answers
// `session.follow` and `session.page` from a log, as SPEC 3.1 pages it.
import assert from "node:assert/strict";
import { test } from "node:test";

import { AcpConnection } from "../../acp_server/web/connection.js";
import { HistoryProtocolError } from "../../acp_server/web/decode.js";
import { Follow } from "../../acp_server/web/follow.js";
import { Gap } from "../../acp_server/web/journal.js";
import { FakeSocket, page, randomLog } from "./support.mjs";

const ADDRESS = { kind: "session", sessionId: "s0" };
const LOG = randomLog(7, 6);

class Server {
  /** A session whose log is `log`, of which the first `appended` events exist so far. */
  constructor(log, appended) {
    this.log = log;
    this.appended = appended;
    this.socket = new FakeSocket();
    this.connection = new AcpConnection(this.socket);
    this.requests = [];
    this.subscriptions = 0;
    this.subscriptionId = null;
    this.afterFollow = null;
    this.unfollowError = null;
    this.socket.onsend = (message) => this.#answer(message);
  }

  #answer({ id, method, params }) {
    if (method === undefined) return;
    this.requests.push([method, params]);
    let result = {};
    if (method === "session.follow") {
      this.subscriptionId = `sub${++this.subscriptions}`;
      const { records, hasMore } = page(this.log, this.appended, params.maxMessages);
      const cursor = this.appended - 1;
      result = { subscriptionId: this.subscriptionId, header: { sessionId: "s0" }, cursor, records, hasMore };
    } else if (method === "session.page") {
      result = page(this.log, Math.min(params.throughSeq + 1, params.beforeSeq ?? Infinity), params.maxMessages);
    }
    const error = method === "session.unfollow" ? this.unfollowError : null;
    queueMicrotask(() => {
      this.socket.receive(error ? { jsonrpc: "2.0", id, error } : { jsonrpc: "2.0", id, result });
      if (method === "session.follow") this.afterFollow?.();
    });
  }

  /** Send the live frame of the event with this seq. */
  send(seq, subscriptionId = this.subscriptionId) {
    this.appended = Math.max(this.appended, seq + 1);
    const params = { subscriptionId, event: structuredClone(this.log[seq]) };
    this.socket.receive({ jsonrpc: "2.0", method: "session.event", params });
  }

  end(reason, lastSeq) {
    const params = { subscriptionId: this.subscriptionId, reason, lastSeq };
    this.socket.receive({ jsonrpc: "2.0", method: "session.followEnded", params });
  }

  methods() {
    return this.requests.map(([method]) => method);
  }
}

/** The listeners of a follow, with promises of what they will be told. */
function listen() {
  const seen = [];
  let waiters = [];
  let ended, failed;
  const listener = {
    seen,
    rewinds: [],
    ended: new Promise((resolve) => (ended = resolve)),
    failed: new Promise((resolve) => (failed = resolve)),
    onEvents(events) {
      seen.push(...events);
      waiters = waiters.filter(([seq, resolve]) => seen.at(-1).seq < seq || resolve());
    },
    onRewind: (lastSeq) => listener.rewinds.push([lastSeq, seen.length]),
    onEnd: (reason) => ended(reason),
    onError: (error) => failed(error),
    /** Resolves once the events passed on reach `seq`. */
    through: (seq) =>
      seen.length && seen.at(-1).seq >= seq
        ? Promise.resolve()
        : new Promise((resolve) => waiters.push([seq, resolve])),
  };
  return listener;
}

async function started(server, options = {}) {
  const listener = listen();
  const follow = await Follow.start(server.connection, ADDRESS, { maxMessages: 3, ...listener, ...options });
  return { follow, listener };
}

test("a follow starts from the snapshot the server answered", async () => {
  const server = new Server(LOG, 40);
  const { follow } = await started(server);
  assert.deepEqual(server.requests, [["session.follow", { address: ADDRESS, maxMessages: 3 }]]);
  assert.deepEqual(follow.header, { sessionId: "s0" });
  assert.equal(follow.subscriptionId, "sub1");
  assert.equal(follow.journal.lastSeq, 39);
  assert.deepEqual(follow.journal.events, LOG.slice(follow.journal.firstSeq, 40));
});

test("live events are passed on in seq order, each once", async () => {
  const server = new Server(LOG, 40);
  const { listener } = await started(server);
  for (const seq of [40, 41, 41, 39, 42, 43, 44]) server.send(seq);
  await listener.through(44);
  assert.deepEqual(listener.seen, LOG.slice(40, 45));
});

test("a live event after a gap is held back while the gap is paged", async () => {
  const server = new Server(LOG, 40);
  const { follow, listener } = await started(server);
  server.send(40);
  server.send(44);
  await listener.through(44);
  assert.deepEqual(listener.seen, LOG.slice(40, 45));
  assert.deepEqual(follow.repaired, [new Gap(40, 44)]);
  assert.deepEqual(server.requests[1], ["session.page", { address: ADDRESS, throughSeq: 43, maxMessages: 3 }]);
});

test("frames sent right after the follow answer are kept", async () => {
  const server = new Server(LOG, 40);
  server.afterFollow = () => [40, 41, 42].forEach((seq) => server.send(seq));
  const { listener } = await started(server);
  await listener.through(42);
  assert.deepEqual(listener.seen, LOG.slice(40, 43));
});

test("an overflow is answered by following again and paging back until the new snapshot joins", async () => {
  const server = new Server(LOG, 40);
  const { follow, listener } = await started(server, { maxMessages: 1 });
  server.send(40);
  server.appended = LOG.length - 5; // appended while nothing was sent
  server.end("overflow", 40);
  await listener.through(LOG.length - 6);
  assert.deepEqual(listener.seen, LOG.slice(40, LOG.length - 5));
  assert.deepEqual(follow.overflows, [40]);
  assert.equal(follow.subscriptionId, "sub2");
  assert.ok(server.methods().filter((method) => method === "session.page").length >= 2, server.methods());
});

test("a rewind drops the events the log never stored, and the ones that take their seqs come as new", async () => {
  const rewritten = [...LOG.slice(0, 42), ...randomLog(8, 6).slice(42).map((event) => ({ ...event, time: 1 }))];
  const server = new Server(LOG, 40);
  const { follow, listener } = await started(server);
  [40, 41, 42, 43].forEach((seq) => server.send(seq));
  await listener.through(43);
  server.log = rewritten;
  server.appended = 42;
  server.end("rewound", 41);
  server.afterFollow = () => [42, 43, 44].forEach((seq) => server.send(seq));
  await listener.through(44);
  assert.deepEqual(listener.seen, [...LOG.slice(40, 44), ...rewritten.slice(42, 45)]);
  assert.deepEqual(listener.rewinds, [[41, 4]]);
  assert.deepEqual(follow.rewinds, [41]);
  assert.deepEqual(follow.journal.eventsAfter(39), rewritten.slice(40, 45));
});

test("a follow the server ends for another reason ends, with no unfollow", async () => {
  const server = new Server(LOG, 40);
  const { follow, listener } = await started(server);
  server.end("deleted", 39);
  assert.equal(await listener.ended, "deleted");
  server.send(40, "sub1");
  assert.equal(follow.journal.lastSeq, 39);
  assert.deepEqual(server.methods(), ["session.follow"]);
});

test("loadOlder pages back before the first seq held and prepends, until nothing is older", async () => {
  const server = new Server(LOG, LOG.length);
  const { follow } = await started(server);
  const firsts = [follow.journal.firstSeq];
  while (await follow.loadOlder()) firsts.push(follow.journal.firstSeq);
  assert.deepEqual(follow.journal.events, LOG);
  const pages = server.requests.filter(([method]) => method === "session.page");
  assert.deepEqual(pages.map(([, params]) => params.beforeSeq), firsts);
  assert.equal(await follow.loadOlder(), false);
  assert.equal(server.requests.filter(([method]) => method === "session.page").length, firsts.length);
});

test("loadOlder called again while it pages shares its page", async () => {
  const server = new Server(LOG, LOG.length);
  const { follow } = await started(server);
  const first = follow.journal.firstSeq;
  const [a, b] = await Promise.all([follow.loadOlder(), follow.loadOlder()]);
  assert.deepEqual([a, b], [true, true]);
  assert.deepEqual(server.methods(), ["session.follow", "session.page"]);
  assert.deepEqual(follow.journal.events, LOG.slice(follow.journal.firstSeq));
  assert.ok(follow.journal.firstSeq < first);
});

test("close unfollows, and frames after it are ignored", async () => {
  const server = new Server(LOG, 40);
  const { follow } = await started(server);
  await follow.close();
  assert.deepEqual(server.requests.at(-1), ["session.unfollow", { subscriptionId: "sub1" }]);
  server.send(40, "sub1");
  assert.equal(follow.journal.lastSeq, 39);
});

test("closing a follow the server has just ended on its own is no error", async () => {
  const server = new Server(LOG, 40);
  const { follow } = await started(server);
  server.unfollowError = { code: -32602, message: "no subscription sub1" };
  await follow.close();
  assert.deepEqual(server.methods(), ["session.follow", "session.unfollow"]);
});

test("frames of another subscription sent while following are ignored", async () => {
  const server = new Server(LOG, 40);
  const other = { ...LOG[40], data: { other: true } };
  server.afterFollow = () => {
    const params = { subscriptionId: "sub-of-someone-else", event: other };
    server.socket.receive({ jsonrpc: "2.0", method: "session.event", params });
    server.send(40);
  };
  const { listener } = await started(server);
  await listener.through(40);
  assert.deepEqual(listener.seen, [LOG[40]]);
});

test("frames of another subscription are ignored", async () => {
  const server = new Server(LOG, 40);
  const { follow } = await started(server);
  server.send(40, "sub-of-someone-else");
  assert.equal(follow.journal.lastSeq, 39);
});

test("a malformed live event is a HistoryProtocolError that ends the follow", async () => {
  const server = new Server(LOG, 40);
  const { follow, listener } = await started(server);
  const event = { ...LOG[40], seq: -1 };
  server.socket.receive({ jsonrpc: "2.0", method: "session.event", params: { subscriptionId: "sub1", event } });
  const error = await listener.failed;
  assert.ok(error instanceof HistoryProtocolError);
  assert.equal(error.message, "live event: Expected `int` >= 0 - at `$.seq`");
  assert.equal(await listener.ended, "error");
  assert.equal(follow.error, error);
  assert.deepEqual(server.requests.at(-1), ["session.unfollow", { subscriptionId: "sub1" }]);
});

test("the connection closing ends the follow", async () => {
  const server = new Server(LOG, 40);
  const { listener } = await started(server);
  server.socket.close(1006);
  assert.equal(await listener.ended, "disconnected");
});
