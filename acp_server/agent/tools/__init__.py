"""The agent's tools (SPEC 4.3): a registry per session of built-in and MCP tools.

The package's public face is `run_tool` with its `ToolContext` and `ToolOutcome`, the
`ToolRegistry` of `Tool`s, `BUILTIN_TOOLS`, and the argument types. Modules inside:

- `registry`: what a tool is (name, schema, kind, title, runner) and a session's set of them;
- `builtin`: the built-in tools, registered; `arguments`: their argument structs and schemas;
- `base`: context, outcome, limits, the `ToolError` a tool raises for the model to read;
- `runner`: dispatch, and the one place failures become error outcomes;
- `permission`: `session/request_permission`;
- `files`, `commands`, `plan`: the built-in tools' work; `excerpts`: caps and line ranges;
- `coding`: the runners of `edit_file`, `list_directory`, `glob` and `grep`, over their engines
  `edit`, `listing` and `search` (with `tree`, `ignore` and `globs` beneath them);
- `mcp`: the tools of a session's MCP servers (imported only by sessions that have some);
- `elicitation`: forms shown to the user, for `ask_user` (offered only to a client that shows
  them) and for MCP servers' questions.

Path confinement lives beside this package, in `acp_server.agent.confinement`.
"""

from __future__ import annotations

from .arguments import (
    ReadFileArgs,
    RunCommandArgs,
    TaskArgs,
    TodoItem,
    TodoWriteArgs,
    WriteFileArgs,
)
from .base import (
    KeptFromTools,
    ToolContext,
    ToolError,
    ToolLimits,
    ToolOutcome,
    error_outcome,
    invalid_arguments,
)
from .builtin import BUILTIN_TOOLS
from .permission import PERMISSION_OPTIONS
from .registry import Tool, ToolRegistry
from .runner import run_tool

__all__ = [
    "BUILTIN_TOOLS",
    "PERMISSION_OPTIONS",
    "KeptFromTools",
    "ReadFileArgs",
    "RunCommandArgs",
    "TaskArgs",
    "TodoItem",
    "TodoWriteArgs",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolLimits",
    "ToolOutcome",
    "ToolRegistry",
    "WriteFileArgs",
    "error_outcome",
    "invalid_arguments",
    "run_tool",
]
