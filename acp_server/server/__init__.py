"""The stdio JSON-RPC server and the ACP agent side (SPEC 0, 4).

Layers, from the wire inwards:
- `transport`: bounded newline framing over the process's stdio, one ordered writer;
- `rpc`: the JSON-RPC connection (inbound dispatch via jsonrpcserver, outbound requests,
  cancellation);
- `errors`: the one table from exceptions to JSON-RPC error codes;
- `protocol`: msgspec types for the ACP messages handled;
- `sessions`: live sessions and the session lifecycle over the session store;
- `agent`: the ACP method handlers;
- `app`: `run_server`, what `acp-server serve` runs.
"""
