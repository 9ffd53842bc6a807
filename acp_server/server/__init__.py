"""The JSON-RPC server and the ACP agent side (SPEC 0, 3, 4).

Layers, from the wire inwards (the framing itself is `acp_server.transports`'; the `initialize`
answer given while the server starts is `acp_server.startup.handshake`'s):
- `rpc`: the JSON-RPC connection (inbound dispatch via jsonrpcserver, outbound requests,
  cancellation), over any transport's messages;
- `errors`: the one table from exceptions to JSON-RPC error codes;
- `protocol`: msgspec types for the ACP messages handled;
- `live`: a live session (one open for writing here), its queue of prompts and the clients
  attached to it; `attached`: how its updates and requests reach those clients;
- `sessions`: the session lifecycle over the store, one registry of live sessions per process;
- `agent`: the ACP method handlers of one connection, with `params` (the checks of request
  params beyond the schema), `port` (how the agent loop reaches the client) and `mcp_connect`
  (a session's MCP servers connected as it goes live); `history`: the history API's;
- `app`: `run_server`, what `acp-server serve` runs on stdio; `listen`: `serve --listen`, the
  same over WebSocket for many connections.
"""
