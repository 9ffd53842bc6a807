"""The ACP schema the official TypeScript SDK bundles (`schema/v1/schema.unstable.json` of the
pinned `@agentclientprotocol/sdk`), for holding frames to the protocol's newer shapes that the
Python models do not know yet (a test helper).

The package comes from `node_with_packages`, so a test using it is skipped, saying why, on a
machine without Node.js and npm (and fails in CI).
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from jsonschema import Draft202012Validator
from node_packages import CURRENT_SDK, PACKAGES, node_with_packages

PYTHON_MODELS_LACK: frozenset[str] = frozenset(
    {"subagent_update", "session_message", "session_message_chunk"}
)
"""The `sessionUpdate` kinds the pinned Python models (`agent-client-protocol`) do not know:
frames of these kinds are held to this schema instead."""

SCHEMA_FILE = PACKAGES / "node_modules" / CURRENT_SDK / "schema" / "v1" / "schema.unstable.json"


@cache
def unstable_schema() -> dict[str, Any]:
    node_with_packages("checking frames against the TypeScript SDK's ACP schema")
    schema: dict[str, Any] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    return schema


@cache
def validator(definition: str) -> Draft202012Validator:
    """A validator for one `$defs` entry, such as `SessionNotification`."""
    schema = unstable_schema()
    return Draft202012Validator({"$ref": f"#/$defs/{definition}", "$defs": schema["$defs"]})


def check(definition: str, value: Any) -> None:
    """`value` is a valid `definition` of the SDK's unstable v1 schema, else a failure listing
    every violation."""
    errors = [
        f"{list(e.absolute_path)}: {e.message}" for e in validator(definition).iter_errors(value)
    ]
    assert not errors, f"{json.dumps(value)} is not a valid {definition}:\n" + "\n".join(errors)
