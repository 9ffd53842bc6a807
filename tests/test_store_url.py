"""Store URLs (SPEC 2.6): what each names, what is refused, and passwords never shown."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from acp_server.storage.url import StoreUrl, check_store_url, parse_store_url, redact_url


def test_a_directory_path_is_a_jsonl_store() -> None:
    assert parse_store_url("some/dir") == StoreUrl("jsonl", Path("some/dir"), "some/dir")


def test_a_file_url_is_a_jsonl_store_in_its_absolute_directory() -> None:
    assert parse_store_url("file:///var/lib/acp%20sessions") == StoreUrl(
        "jsonl", Path("/var/lib/acp sessions"), "file:///var/lib/acp%20sessions"
    )


def test_a_sqlite_url_names_its_database_file() -> None:
    assert parse_store_url("sqlite:///srv/acp/sessions.db") == StoreUrl(
        "sqlite", Path("/srv/acp/sessions.db"), "sqlite:///srv/acp/sessions.db"
    )


@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_postgresql_urls_name_the_postgresql_engine(scheme: str) -> None:
    url = parse_store_url(f"{scheme}://acp@db.example:5432/acp")
    assert (url.engine, url.path) == ("postgresql", None)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty store URL"),
        ("mysql://db/acp", "unknown store URL scheme 'mysql'"),
        ("sqlite://relative.db", "sqlite://relative.db: the path must be absolute"),
        ("file://host/dir", "file://host/dir: the path must be absolute"),
        ("sqlite:///", "sqlite:///: no path"),
        ("sqlite:///a.db?mode=ro", "takes no query or fragment"),
        ("sqlite:a.db", "sqlite:a.db: the path must be absolute"),
        ("file:sessions", "file:sessions: the path must be absolute"),
        ("postgresql:acp", "postgresql:acp: write postgresql://user@host:port/db"),
    ],
)
def test_a_url_naming_no_store_is_refused_saying_why(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("?", r"\?")):
        parse_store_url(text)


def test_a_password_in_a_url_is_shown_as_stars() -> None:
    assert redact_url("postgresql://acp:s3cret@db:5432/acp") == "postgresql://acp:***@db:5432/acp"


def test_a_password_of_a_url_of_several_hosts_is_shown_as_stars() -> None:
    assert (
        redact_url("postgresql://acp:s3cret@db1:5432,db2:5433/acp")
        == "postgresql://acp:***@db1:5432,db2:5433/acp"
    )


def test_a_password_parameter_is_shown_as_stars() -> None:
    assert (
        redact_url("postgresql://acp@db/acp?sslmode=require&password=s3cret")
        == "postgresql://acp@db/acp?sslmode=require&password=***"
    )
    assert redact_url("host=a,b password='s3 cret' dbname=acp") == (
        "host=a,b password=*** dbname=acp"
    )


def test_a_url_without_a_password_is_shown_as_given() -> None:
    assert redact_url("postgresql://acp@db/acp") == "postgresql://acp@db/acp"
    assert redact_url("/plain/dir") == "/plain/dir"


def test_a_refused_url_hides_its_password() -> None:
    with pytest.raises(ValueError) as refused:
        parse_store_url("mongodb://acp:s3cret@db/acp")
    assert "s3cret" not in str(refused.value)
    assert "mongodb://acp:***@db/acp" in str(refused.value)


def test_a_sqlite_database_needs_its_directory(tmp_path: Path) -> None:
    url = parse_store_url(f"sqlite://{tmp_path}/missing/sessions.db")
    assert check_store_url(url) == f"{url.text}: no directory {tmp_path / 'missing'}"


def test_a_jsonl_store_must_be_a_directory(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    assert check_store_url(parse_store_url(str(tmp_path / "file"))) == (
        f"{tmp_path / 'file'}: not a directory"
    )


def serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_server", "serve", *args],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.process
def test_serve_with_an_unknown_scheme_exits_2_with_one_line() -> None:
    done = serve("--store", "mysql://acp:pw@db/acp")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "acp-server serve: error: --store: unknown store URL scheme 'mysql' in "
        "mysql://acp:***@db/acp (use a directory, file:///abs/dir, sqlite:///abs/path.db or "
        "postgresql://...)"
    ]


@pytest.mark.process
def test_serve_with_a_postgresql_server_it_cannot_reach_exits_2_hiding_the_password() -> None:
    done = serve("--store", "postgresql://acp:pw@db.invalid/acp")
    assert done.returncode == 2
    assert done.stderr.startswith(
        "acp-server serve: error: postgresql://acp:***@db.invalid/acp: cannot connect: "
    )
    assert (len(done.stderr.splitlines()), "pw" in done.stderr) == (1, False)


@pytest.mark.process
def test_serve_with_a_database_that_is_not_sqlite_exits_2_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "notes.db").write_text("not a database\n" * 100)
    done = serve("--store", f"sqlite://{tmp_path}/notes.db")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"acp-server serve: error: sqlite://{tmp_path}/notes.db: cannot open the database: "
        "file is not a database"
    ]


@pytest.mark.process
def test_serve_refuses_a_store_and_a_sessions_dir_together(tmp_path: Path) -> None:
    done = serve("--store", str(tmp_path), "--sessions-dir", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "acp-server serve: error: --store and --sessions-dir: give one of them "
        "(a directory is a store URL)"
    ]


@pytest.mark.process
def test_serve_takes_the_store_from_the_environment(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "acp_server", "serve"],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"ACP_SERVER_STORE": "nosuch://x", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 2
    assert done.stderr.startswith(
        "acp-server serve: error: ACP_SERVER_STORE: unknown store URL scheme 'nosuch'"
    )
