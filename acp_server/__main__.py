"""`python -m acp_server`: the same as the `acp-server` command."""

from .startup.launch import main

raise SystemExit(main())
