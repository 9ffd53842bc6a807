"""JSON-RPC 2.0 for both ends, importing nothing else of the package.

- `peer`: the sans-I/O `Peer` (messages in, events out; answer, fail, request, notify and cancel
  out; the id tables; the size limit), in the style of h11.
- `runner`: the anyio `Runner` that drives a peer over a transport (one task group per
  connection; waiters for our requests, cancel scopes for the other end's).
- `wire`: the message shapes and the encoders of every frame.
- `errors`: the error classes both ends share.

The server adds jsonrpcserver's dispatch on top (`server/rpc.py`); the Python client, the
snapshot runner and the tests' driver use the peer for their ids, answers and cancels.
"""
