"""`python -m acp_server`: the same as the `acp-server` command."""

from .cli import main

raise SystemExit(main())
