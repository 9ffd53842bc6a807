"""SQL stores as earlier schema versions made them, for the upgrade tests of every step."""

from __future__ import annotations

from collections.abc import Callable


def as_version(execute: Callable[[str], object], prefix: str, version: int) -> None:
    """Take away from a database of this build's schema what the versions after `version`
    added, newest first, and say it is of `version` (`prefix`: `acp_` on PostgreSQL)."""
    if version < 5:  # the list columns and their indexes
        execute(f"DROP INDEX {prefix}sessions_by_created")
        execute(f"DROP INDEX {prefix}sessions_by_cwd")
        execute(f"ALTER TABLE {prefix}sessions DROP COLUMN cwd")
        execute(f"ALTER TABLE {prefix}sessions DROP COLUMN origin")
    if version < 4:
        execute(f"DROP TABLE {prefix}checks")
    if version < 3:
        execute(f"DROP TABLE {prefix}blobs")
    if version < 2:
        execute(f"ALTER TABLE {prefix}sessions DROP COLUMN archived")
    execute(f"UPDATE {prefix}store SET value = {version} WHERE key = 'schema_version'")
