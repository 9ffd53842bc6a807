"""What runs before the rest of the program is imported.

- `launch`: the `acp-server` entry point; for the stdio server, it starts the early answer
  before it imports the command line;
- `handshake`: the `initialize` answer, and the thread that gives it while the server starts.

Both import only the standard library's lightest parts and a few leaf modules of the package:
`tests/test_startup_imports.py` holds them to it.
"""
