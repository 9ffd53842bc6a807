"""An MCP server that holds its start until the test lets it go, for the tests.

    python tests/mcp_servers/held.py RELEASE

It writes nothing and answers nothing until the file RELEASE exists, then serves one tool,
`ping`, over stdio. Until then it is a server still connecting, for as long as the test
wants: whatever the test sees before it creates RELEASE happened while the server was held,
whatever the clock says.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer

server = MCPServer("held")


@server.tool(description="Answers `pong`.")
def ping() -> str:
    return "pong"


if __name__ == "__main__":
    release = Path(sys.argv[1])
    while not release.exists():  # held: the client's `initialize` waits in the pipe
        time.sleep(0.02)
    server.run("stdio")
