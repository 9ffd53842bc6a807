"""Where a PostgreSQL store's connections go (`postgres_standby`), read from its URLs alone: a
writer of a URL naming several hosts asks for the primary, the standbys' reads prefer a standby
and give up on one quickly; what a URL says itself is kept."""

from __future__ import annotations

from psycopg.conninfo import conninfo_to_dict

from acp_server.storage.sql.postgres_standby import (
    reader_conninfo,
    several_hosts,
    writer_conninfo,
)


def test_a_url_of_one_host_is_the_writers_as_given() -> None:
    url = "postgresql://acp:pw@db1:5432/acp"
    assert writer_conninfo(url) == url


def test_a_writer_of_a_url_of_several_hosts_asks_for_the_primary() -> None:
    conninfo = writer_conninfo("postgresql://acp:pw@db1:5432,db2:5433/acp?sslmode=require")
    assert conninfo_to_dict(conninfo) == {
        "user": "acp",
        "password": "pw",
        "host": "db1,db2",
        "port": "5432,5433",
        "dbname": "acp",
        "sslmode": "require",
        "target_session_attrs": "read-write",
    }


def test_a_libpq_string_of_several_hosts_is_read_as_a_url_is() -> None:
    assert several_hosts("host=db1,db2 dbname=acp")
    assert conninfo_to_dict(writer_conninfo("host=db1,db2 dbname=acp")) == {
        "host": "db1,db2",
        "dbname": "acp",
        "target_session_attrs": "read-write",
    }


def test_a_writers_own_target_session_attrs_is_kept() -> None:
    url = "postgresql://db1,db2/acp?target_session_attrs=primary"
    assert writer_conninfo(url) == url


def test_the_standbys_reads_prefer_a_standby_and_give_up_on_one_quickly() -> None:
    assert conninfo_to_dict(reader_conninfo("postgresql://acp@db2/acp")) == {
        "user": "acp",
        "host": "db2",
        "dbname": "acp",
        "target_session_attrs": "prefer-standby",
        "connect_timeout": "2",
    }


def test_what_the_standbys_url_says_itself_is_kept() -> None:
    url = "postgresql://db2/acp?target_session_attrs=standby&connect_timeout=9"
    assert reader_conninfo(url) == url


def test_a_conninfo_libpq_cannot_read_is_left_for_connecting_to_refuse() -> None:
    assert writer_conninfo("postgresql://db1,db2/acp?no_such_option=1") == (
        "postgresql://db1,db2/acp?no_such_option=1"
    )
    assert not several_hosts("host='unterminated")
