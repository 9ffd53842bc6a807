"""The agent's tools (SPEC 4.3): `read_file`, `write_file`, `run_command`, `todo_write`, and
the arguments and definition of `task` (whose subagent the loop runs itself).

The package's public face is `run_tool` with its `ToolContext` and `ToolOutcome`, the
`TOOL_DEFINITIONS` sent to models, and the argument types. Modules inside:

- `arguments`: argument structs and the JSON Schemas generated from them;
- `base`: context, outcome, limits, the `ToolError` a tool raises for the model to read;
- `runner`: dispatch, and the one place failures become error outcomes;
- `permission`: `session/request_permission`;
- `files`, `commands`, `plan`: the tools; `excerpts`: caps and line ranges, without I/O.

Path confinement lives beside this package, in `acp_server.agent.confinement`.
"""

from __future__ import annotations

from .arguments import (
    ARGUMENT_TYPES,
    TOOL_DEFINITIONS,
    ReadFileArgs,
    RunCommandArgs,
    TaskArgs,
    TodoItem,
    TodoWriteArgs,
    WriteFileArgs,
)
from .base import ToolContext, ToolError, ToolLimits, ToolOutcome, error_outcome, invalid_arguments
from .permission import PERMISSION_OPTIONS
from .runner import run_tool

__all__ = [
    "ARGUMENT_TYPES",
    "PERMISSION_OPTIONS",
    "TOOL_DEFINITIONS",
    "ReadFileArgs",
    "RunCommandArgs",
    "TaskArgs",
    "TodoItem",
    "TodoWriteArgs",
    "ToolContext",
    "ToolError",
    "ToolLimits",
    "ToolOutcome",
    "WriteFileArgs",
    "error_outcome",
    "invalid_arguments",
    "run_tool",
]
