"""The ACP schema the official TypeScript SDK bundles (a test helper): frames of the protocol's
newer shapes (compaction updates, notices, subagents, elicitation, the client's system prompt),
which the Python SDK's models do not know yet, are held to the v1 unstable schema of `@agentclientprotocol/sdk` (the version `node_packages` pins),
installed by `node_with_packages`: never to a file outside the repository.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from node_packages import CURRENT_SDK, PACKAGES, node_with_packages

PYTHON_MODELS_LACK: frozenset[str] = frozenset(
    {
        "compaction_update",
        "compaction_summary_chunk",
        "notice",
        "subagent_update",
        "session_message",
        "session_message_chunk",
    }
)
"""The `sessionUpdate` kinds the pinned Python models (`agent-client-protocol`) do not know:
frames of these kinds are held to this schema instead."""

SCHEMAS = PACKAGES / "node_modules" / CURRENT_SDK / "schema"
SCHEMA = SCHEMAS / "v1" / "schema.unstable.json"
SCHEMA_V2 = SCHEMAS / "v2" / "schema.unstable.json"
"""ACP v2's schema as the SDK bundles it (the unstable one: it holds the stable one's shapes and
the unstable methods and updates the server also speaks over v2)."""


@functools.cache
def _schema(path: Path = SCHEMA) -> dict[str, Any]:
    node_with_packages("validating frames against the SDK's ACP schema")
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


@functools.cache
def validator(definition: str, path: Path = SCHEMA) -> Draft202012Validator:
    """A validator of the schema's `$defs[definition]` (such as `SessionNotification`)."""
    schema = _schema(path)
    assert definition in schema["$defs"], f"the SDK's schema has no {definition}"
    # The document's own root (`anyOf` every message) is left out: only the definition holds.
    return Draft202012Validator({"$defs": schema["$defs"], "$ref": f"#/$defs/{definition}"})


def check(definition: str, value: Any, path: Path = SCHEMA) -> None:
    """`value` is valid as the schema's `definition`, else a failure saying why."""
    errors = sorted(validator(definition, path).iter_errors(value), key=lambda e: list(e.path))
    assert not errors, f"{definition} rejects {json.dumps(value)}: " + "; ".join(
        f"{list(e.path)}: {e.message}" for e in errors
    )


def check_v2(definition: str, value: Any) -> None:
    """`value` is valid as the v2 schema's `definition` (such as `UpdateSessionNotification`,
    `InitializeResponse`), else a failure saying why."""
    check(definition, value, SCHEMA_V2)
