"""What runs before the rest of the program is imported.

- `launch`: the `acp-server` entry point; for the stdio server, it claims the protocol streams
  and starts the early answer before it imports the command line;
- `handshake`: the `initialize` answer, and the thread that gives it while the server starts.

`handshake` imports only the standard library's lightest parts. Before the answer starts,
`launch` imports `handshake`, the streams' claim (`transports.stdio_fds`) and the providers'
registry, whose key variables decide whether this process serves or starts again without them
(the registry brings msgspec with it). `tests/test_startup_imports.py` holds them to that.
"""
