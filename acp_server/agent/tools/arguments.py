"""The built-in tools' arguments as msgspec types, and the JSON Schemas the model sees.

The schemas are generated from the same structs that decode the model's arguments, so what
the model is told and what the server accepts cannot drift apart. Unknown fields are refused:
a misspelt `timeout_ms` silently ignored would be worse than an error the model can fix.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

MAX_TIMEOUT_MS: Final = 1_800_000


class Arguments(Struct, rename="camel", forbid_unknown_fields=True, omit_defaults=True):
    """Base of the argument structs: camelCase keys, strict about unknown keys."""


# Field types, named so the structs below read like the SPEC's table.
FilePath = Annotated[
    str, Meta(min_length=1, description="The file: absolute, or relative to the working directory.")
]
FirstLine = Annotated[int, Meta(ge=1, description="First line to return (1-based).")]
LineLimit = Annotated[int, Meta(ge=1, description="Maximum number of lines to return.")]
FileText = Annotated[str, Meta(description="The complete new text of the file.")]
Program = Annotated[
    str, Meta(min_length=1, description="The program to run: a name looked up in PATH, or a path.")
]
ProgramArgs = Annotated[
    list[str], Meta(description="The program's arguments, one string each (no shell quoting).")
]
TimeoutMs = Annotated[
    int,
    Meta(
        ge=1,
        le=MAX_TIMEOUT_MS,
        description="Kill the program after this many milliseconds (default 120000).",
    ),
]
TodoText = Annotated[str, Meta(min_length=1, description="What is to be done.")]
TodoStatus = Annotated[
    Literal["pending", "in_progress", "completed"], Meta(description="Where the item stands.")
]
TodoPriority = Annotated[
    Literal["high", "medium", "low"], Meta(description="How much it matters (default medium).")
]
Prompt = Annotated[
    str,
    Meta(min_length=1, description="The complete, self-contained instructions for the subagent."),
]


class ReadFileArgs(Arguments):
    path: FilePath
    line: FirstLine | UnsetType = UNSET
    limit: LineLimit | UnsetType = UNSET


class WriteFileArgs(Arguments):
    path: FilePath
    content: FileText


class RunCommandArgs(Arguments):
    command: Program
    args: ProgramArgs = []
    timeout_ms: TimeoutMs | UnsetType = UNSET


class TodoItem(Arguments):
    content: TodoText
    status: TodoStatus
    priority: TodoPriority = "medium"


class TodoWriteArgs(Arguments):
    todos: Annotated[list[TodoItem], Meta(description="The whole plan, in order.")]


class TaskArgs(Arguments):
    prompt: Prompt


def parameters_schema(args_type: type[Arguments]) -> dict[str, Any]:
    """A self-contained JSON Schema for `args_type`: references inlined, titles dropped.

    Some model APIs reject `$ref`/`$defs`, and titles and the struct's docstring are noise to a
    model that already has the tool's description.
    """
    schema = msgspec.json.schema(args_type)
    defs: dict[str, Any] = schema.get("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return inline(defs[node["$ref"].rsplit("/", 1)[-1]])
            # A tagged union's `discriminator` names the `$defs` inlined here: it would point
            # nowhere (and it is OpenAPI's, not JSON Schema's).
            return {
                k: fields(v) if k == "properties" else inline(v)
                for k, v in node.items()
                if k not in ("title", "discriminator")
            }
        if isinstance(node, list):
            return [inline(item) for item in node]
        return node

    def fields(node: Any) -> Any:
        # Field names, which may be `title` (a form field's label): kept, their schemas inlined.
        if isinstance(node, dict):
            return {name: inline(schema) for name, schema in node.items()}
        return inline(node)

    parameters: dict[str, Any] = inline(schema)
    parameters.pop("description", None)
    return parameters
