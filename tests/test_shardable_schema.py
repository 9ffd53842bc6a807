"""The PostgreSQL store's tables stay shardable by session id (docs/scale.md): a sharded
PostgreSQL such as Citus requires every primary key of a distributed table to hold its
distribution column, and keeps one session's rows of every table together only when each
table is keyed first by the session."""

from __future__ import annotations

import psycopg
import pytest

from acp_server.storage.sql.postgres import PostgresStore

pytestmark = [pytest.mark.anyio, pytest.mark.process]

SESSION_KEYED = {
    "acp_sessions": "id",
    "acp_records": "session",
    "acp_messages": "session",
    "acp_children": "session",
    "acp_blobs": "session",
    "acp_checks": "session",
}
"""Each table distributed by session id, and its session column (docs/scale.md's block)."""


def primary_keys(url: str) -> dict[str, list[str]]:
    """Each `acp_` table's primary key columns, in key order."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT c.relname, a.attname FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indrelid "
            "JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n) ON true "
            "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum "
            "WHERE i.indisprimary AND c.relname LIKE 'acp\\_%' ORDER BY c.relname, k.n"
        ).fetchall()
    keys: dict[str, list[str]] = {}
    for table, column in rows:
        keys.setdefault(table, []).append(column)
    return keys


async def test_every_table_but_the_schema_version_is_keyed_first_by_its_session(
    postgres_url: str,
) -> None:
    store = PostgresStore(postgres_url)
    try:
        await store.prepare()
    finally:
        await store.aclose()
    keys = primary_keys(postgres_url)
    assert {table: columns[0] for table, columns in keys.items()} == {
        "acp_store": "key",
        **SESSION_KEYED,
    }
