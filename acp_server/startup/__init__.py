"""What runs before the rest of the program is imported.

- `launch`: the `acp-server` entry point; for the stdio server, it claims the protocol streams
  and starts the early answer before it imports the command line;
- `handshake`: the `initialize` answer, and the thread that gives it while the server starts;
- `store_location`: which store a command uses when it names none, and whether it is ready for
  the early answer (standard library only).
- `attach` (with `attach_flags`, `attach_places`, `attach_start`, `attach_servers`): `acp-server
  attach`, the stdio relay to the user's shared server, which imports the standard library's
  lightest parts only (`tests/test_attach.py`).

`handshake` imports only the standard library's lightest parts. Before the answer starts,
`launch` imports `handshake`, the streams' claim (`transports.stdio_fds`), the providers' names,
whose key variables decide whether this process serves or starts again without them, and
`store_location`, which decides whether the store is ready for an early answer. `tests/test_startup_imports.py` holds them to that.
"""
