"""Framing only: how JSON-RPC messages cross a byte stream, with one protocol behind them all.

- `stdio`: newline-delimited messages over the process's stdin and stdout;
- `websocket`: one message per WebSocket text frame over a TCP connection (`serve --listen`).

Both hand `acp_server.server.rpc.Connection` the same things: an async iterable of inbound
messages, and a sink that sends outbound frames in order.
"""
