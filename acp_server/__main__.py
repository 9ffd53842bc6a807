"""`python -m acp_server`: the same as the `acp-server` command."""

from .launch import main

raise SystemExit(main())
