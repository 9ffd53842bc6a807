// acp-server's browser client (SPEC 3): the history API of a session, over a WebSocket.
//
// Served by `acp-server serve` at /client.js, an ES module without dependencies that re-exports
// the four modules it is made of (each served beside it, and importable on its own):
//
// - decode.js: `decodeRecords` and `decodeRecord`, `decodeEvent`: records expanded to exact
//   events and checked as the Python codec checks them; `HistoryProtocolError`.
// - journal.js: `Journal`, one session's events, gapless (SPEC 3.3); `Gap`.
// - connection.js: `AcpConnection`, JSON-RPC 2.0 over a WebSocket; `RpcError`,
//   `ConnectionClosed`.
// - follow.js: `Follow`, `session.follow` kept gapless across overflows and rewinds, older
//   history paged in by `loadOlder`.
//
// They import one another as decode <- journal <- follow, and connection <- follow.

export * from "./decode.js";
export * from "./journal.js";
export * from "./connection.js";
export * from "./follow.js";
