"""The ACP v1 schema as the TypeScript SDK 2.4.0 bundles it (a test helper): the unstable v1
schema, newer than the Python SDK's models, for the fields and methods those do not know yet.

It is read from the npm package `@agentclientprotocol/sdk` that `node_packages` installs
(never from outside the repository); without Node.js and npm the test is skipped (in CI it
fails), as every test that needs those packages is.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from jsonschema import Draft202012Validator
from node_packages import CURRENT_SDK, PACKAGES, node_with_packages

SCHEMA_FILE = PACKAGES / "node_modules" / CURRENT_SDK / "schema" / "v1" / "schema.unstable.json"


@functools.cache
def _definitions() -> dict[str, Any]:
    node_with_packages("checking frames against the ACP schema of the TypeScript SDK 2.4.0")
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    return dict(schema["$defs"])


@functools.cache
def validator(name: str) -> Draft202012Validator:
    """A validator for the schema's `$defs` entry `name` (`SessionNotification`...)."""
    definitions = _definitions()
    assert name in definitions, f"the SDK 2.4.0 schema has no definition {name!r}"
    return Draft202012Validator({"$defs": definitions, "$ref": f"#/$defs/{name}"})


def validate(name: str, value: Any, what: str) -> None:
    """`value` fits the schema's `name`, else a failure naming `what` and every violation."""
    errors = sorted(validator(name).iter_errors(value), key=lambda e: list(e.absolute_path))
    assert not errors, f"{what} violates the SDK 2.4.0 schema ({name}): {json.dumps(value)}\n" + (
        "\n".join(f"at {list(e.absolute_path)}: {e.message}" for e in errors)
    )
