"""The `acp-server` command line: one module per command.

- `main`: parses the command line and runs the command it names, each imported when chosen;
- `parser`, `arguments`: the parser (each command's arguments) and what its parts share;
- `serve_flags`, `serve`: `serve`'s flags, and what they mean together (the rules between
  them, the environment's fallbacks, the API key) before the server runs;
- `demo`, `log`, `store`, `sessions`, `fixture`, `login` (`login` and `logout`): the other
  commands;
- `store_choice`: the store a command uses when it names none (the one `serve` uses);
- `outcome`: the exit statuses every command shares, and a quiet end on a closed output.

The process starts in `acp_server.startup.launch`, which may answer `initialize` before any of
this is imported.
"""
