// The browser client's JSON-RPC 2.0 connection, over a WebSocket stand-in.
import assert from "node:assert/strict";
import { test } from "node:test";

import { AcpConnection, ConnectionClosed, RpcError } from "../../acp_server/web/connection.js";
import { FakeSocket } from "./support.mjs";

function connected() {
  const socket = new FakeSocket();
  return { socket, connection: new AcpConnection(socket) };
}

test("open connects to the URL given and resolves once the socket is open", async () => {
  const sockets = [];
  class Socket extends FakeSocket {
    constructor(url) {
      super(url, { open: false });
      sockets.push(this);
    }
  }
  const opening = AcpConnection.open("ws://host/acp?token=t0k", { WebSocket: Socket });
  assert.deepEqual(sockets.map((socket) => socket.url), ["ws://host/acp?token=t0k"]);
  sockets[0].open();
  const connection = await opening;
  assert.ok(connection instanceof AcpConnection);
});

test("a socket that closes before it opens fails open, without the token in the message", async () => {
  class Socket extends FakeSocket {
    constructor(url) {
      super(url, { open: false });
      queueMicrotask(() => this.close(1006));
    }
  }
  await assert.rejects(
    AcpConnection.open("ws://host/acp?token=t0k", { WebSocket: Socket }),
    new ConnectionClosed("could not connect to ws://host/acp: the connection closed (code 1006)"),
  );
});

test("a request is sent as JSON-RPC 2.0 and resolves with its result", async () => {
  const { socket, connection } = connected();
  const answer = connection.request("session.page", { throughSeq: 3 });
  assert.deepEqual(socket.sent, [{ jsonrpc: "2.0", id: 1, method: "session.page", params: { throughSeq: 3 } }]);
  socket.receive({ jsonrpc: "2.0", id: 1, result: { records: [], hasMore: false } });
  assert.deepEqual(await answer, { records: [], hasMore: false });
});

test("answers are matched to their requests by id, in any order", async () => {
  const { socket, connection } = connected();
  const first = connection.request("a");
  const second = connection.request("b", []);
  assert.deepEqual(socket.sent, [
    { jsonrpc: "2.0", id: 1, method: "a" },
    { jsonrpc: "2.0", id: 2, method: "b", params: [] },
  ]);
  socket.receive({ jsonrpc: "2.0", id: 2, result: "two" });
  socket.receive({ jsonrpc: "2.0", id: 1, result: "one" });
  assert.deepEqual(await Promise.all([first, second]), ["one", "two"]);
});

test("an error answer rejects with an RpcError holding its code, message and data", async () => {
  const { socket, connection } = connected();
  const answer = connection.request("session.page", {});
  socket.receive({ jsonrpc: "2.0", id: 1, error: { code: -32602, message: "throughSeq", data: { field: "throughSeq" } } });
  await assert.rejects(answer, (error) => {
    assert.ok(error instanceof RpcError);
    assert.deepEqual([error.code, error.message, error.data], [-32602, "throughSeq", { field: "throughSeq" }]);
    return true;
  });
});

test("a notification reaches every handler of its method until it stops", () => {
  const { socket, connection } = connected();
  const seen = [];
  const stop = connection.onNotification("session.event", (params) => seen.push(["a", params]));
  connection.onNotification("session.event", (params) => seen.push(["b", params]));
  connection.onNotification("session.followEnded", (params) => seen.push(["ended", params]));
  socket.receive({ jsonrpc: "2.0", method: "session.event", params: { n: 1 } });
  stop();
  socket.receive({ jsonrpc: "2.0", method: "session.event", params: { n: 2 } });
  assert.deepEqual(seen, [["a", { n: 1 }], ["b", { n: 1 }], ["b", { n: 2 }]]);
});

test("a server request without a handler is answered -32601", async () => {
  const { socket } = connected();
  socket.receive({ jsonrpc: "2.0", id: "s1", method: "fs/read_text_file", params: {} });
  await socket.sentCount(1);
  assert.deepEqual(socket.sent, [
    { jsonrpc: "2.0", id: "s1", error: { code: -32601, message: "Method not found: fs/read_text_file" } },
  ]);
});

test("a server request with a handler is answered with its result, or the RpcError it throws", async () => {
  const { socket, connection } = connected();
  connection.onRequest("ask", async (params) => ({ echo: params }));
  connection.onRequest("refuse", () => {
    throw new RpcError(-32000, "no", { why: "test" });
  });
  socket.receive({ jsonrpc: "2.0", id: 7, method: "ask", params: [1] });
  socket.receive({ jsonrpc: "2.0", id: 8, method: "refuse" });
  await socket.sentCount(2);
  assert.deepEqual(
    socket.sent.sort((a, b) => a.id - b.id),
    [
      { jsonrpc: "2.0", id: 7, result: { echo: [1] } },
      { jsonrpc: "2.0", id: 8, error: { code: -32000, message: "no", data: { why: "test" } } },
    ],
  );
});

test("a closing socket rejects the waiting requests and every later one with ConnectionClosed", async () => {
  const { socket, connection } = connected();
  const waiting = connection.request("x");
  socket.close(1001, "going away");
  const closed = new ConnectionClosed("the connection closed (code 1001: going away)");
  await assert.rejects(waiting, closed);
  await assert.rejects(connection.request("y"), closed);
  assert.deepEqual(await connection.closed, { code: 1001, reason: "going away" });
});

test("close closes the socket", async () => {
  const { socket, connection } = connected();
  connection.close();
  assert.equal(socket.readyState, 3);
  assert.deepEqual(await connection.closed, { code: 1000, reason: "" });
});

test("a frame that is not JSON closes the connection", async () => {
  const { socket, connection } = connected();
  const waiting = connection.request("x");
  socket.receive("{not json");
  await assert.rejects(waiting, new ConnectionClosed("the server sent a frame that is not JSON"));
  assert.equal(socket.readyState, 3);
});

test("a server request withdrawn by $/cancel_request aborts its handler's signal and is answered -32800", async () => {
  const { socket, connection } = connected();
  let aborted = null;
  connection.onRequest("ask", (_params, { signal }) =>
    new Promise((resolve) => signal.addEventListener("abort", () => resolve((aborted = "yes")))),
  );
  socket.receive({ jsonrpc: "2.0", id: 9, method: "ask" });
  socket.receive({ jsonrpc: "2.0", method: "$/cancel_request", params: { requestId: 9 } });
  await socket.sentCount(1);
  assert.equal(aborted, "yes");
  assert.deepEqual(socket.sent, [{ jsonrpc: "2.0", id: 9, error: { code: -32800, message: "Request cancelled" } }]);
});
