"""The ACP v1 unstable schema that the TypeScript SDK's npm package bundles (a test helper).

Frames of the protocol's newer shapes (elicitation, the client's system prompt) are held to the
schema of `@agentclientprotocol/sdk`, which `node_packages` installs for the interop tests:
`validator("CreateElicitationRequest")` validates a value against that `$defs` entry.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import jsonschema
from node_packages import CURRENT_SDK, PACKAGES, node_with_packages


@cache
def unstable_schema() -> dict[str, Any]:
    node_with_packages("validating frames with the SDK's schema")
    path = PACKAGES / "node_modules" / CURRENT_SDK / "schema" / "v1" / "schema.unstable.json"
    schema: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return schema


def validator(definition: str) -> jsonschema.protocols.Validator:
    """A validator of the schema's `$defs[definition]`, its references resolved in the file."""
    schema = unstable_schema()
    assert definition in schema["$defs"], f"no {definition} in the SDK's schema"
    # Only the definitions of the file: its own root is the union of every message.
    root = {"$defs": schema["$defs"], "$ref": f"#/$defs/{definition}"}
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(root)
