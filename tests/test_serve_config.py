"""`serve`'s flags read together (`acp_server.cli.serve.serve_config`), in this process: the rules
between them, the environment's fallbacks and the files they name, each problem one message."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server.cli.parser import build_parser
from acp_server.cli.serve import ServeFlagsError, serve_config
from acp_server.core.prompt_render import PromptBase
from acp_server.server.config import ServeConfig


def config(*args: str) -> ServeConfig:
    return serve_config(build_parser("serve").parse_args(["serve", *args]), may_reexec=False)


@pytest.fixture(autouse=True)
def _no_fallbacks(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in (
        "ACP_SERVER_STORE",
        "ACP_SERVER_STORE_READ",
        "ACP_REPLAY_FILE",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ACP_SERVER_SESSIONS_DIR", str(tmp_path))
    monkeypatch.setenv("ACP_SERVER_CONFIG_DIR", str(tmp_path / "config"))  # no stored key either


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--store", "x", "--sessions-dir", "y"],
            "--store and --sessions-dir: give one of them (a directory is a store URL)",
        ),
        (["--model", "m"], "--model applies to --provider openai or anthropic only"),
        (["--thinking-budget", "2000"], "--thinking-budget applies to --provider anthropic only"),
        (["--provider", "openai"], "--provider openai needs --model"),
        (
            ["--provider", "openai", "--model", "m", "--thinking-budget", "2000"],
            "--thinking-budget applies to --provider anthropic only",
        ),
        (
            ["--provider", "anthropic", "--model", "m", "--replay", "x"],
            "--replay applies to --provider llm-replay only",
        ),
        (
            ["--provider", "openai", "--model", "m", "--base-url", "ftp://x"],
            "--base-url: not an http(s) URL: 'ftp://x'",
        ),
        (["--token-file", "/no/such/file"], "--token-file: only with --listen"),
        (["--allow-origin", "http://a.example"], "--allow-origin: only with --listen"),
        (["--max-pending-requests", "3"], "--max-pending-requests: only with --listen"),
        (
            ["--listen", "0", "--token-file", "/dev/null"],
            "--token-file: /dev/null is empty: it must hold the token",
        ),
        (["--replay", "/no/such/fixture"], "--replay: no such file or directory: /no/such/fixture"),
    ],
)
def test_flags_that_do_not_go_together_are_one_message(args: list[str], message: str) -> None:
    with pytest.raises(ServeFlagsError) as raised:
        config(*args)
    assert str(raised.value) == message


STANDBYS = "postgresql://acp:s3cret@db2:5432,db3:5432/acp"


def test_a_postgresql_store_takes_its_standbys_url() -> None:
    assert config("--store", "postgresql://acp@db1/acp", "--store-read", STANDBYS).store_read == (
        STANDBYS
    )


def test_the_standbys_url_comes_from_the_environment_when_no_flag_names_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ACP_SERVER_STORE_READ", STANDBYS)
    assert config("--store", "postgresql://acp@db1/acp").store_read == STANDBYS
    assert (
        config(
            "--store", "postgresql://acp@db1/acp", "--store-read", "postgresql://db4/acp"
        ).store_read
        == "postgresql://db4/acp"
    )


def test_no_standbys_url_reads_everything_from_the_store() -> None:
    assert config("--store", "postgresql://acp@db1/acp").store_read is None


def test_standbys_are_refused_for_a_store_that_is_not_postgresql(tmp_path: Path) -> None:
    with pytest.raises(ServeFlagsError) as raised:
        config("--store", str(tmp_path), "--store-read", STANDBYS)
    assert str(raised.value) == (
        f"--store-read: only with a PostgreSQL store (the store is {tmp_path}, a jsonl store: "
        "it has no standbys)"
    )


def test_a_standbys_url_that_is_not_postgresql_is_refused_with_its_password_hidden(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ACP_SERVER_STORE_READ", "sqlite:///x.db?password=s3cret")
    with pytest.raises(ServeFlagsError) as raised:
        config("--store", "postgresql://acp@db1/acp")
    assert str(raised.value) == (
        "$ACP_SERVER_STORE_READ: sqlite:///x.db?password=***: a sqlite URL takes no query or "
        "fragment"
    )
    with pytest.raises(ServeFlagsError) as raised:
        config("--store", "postgresql://acp@db1/acp", "--store-read", "/var/standby")
    assert str(raised.value) == (
        "--store-read: /var/standby: the standbys' URL is postgresql://... "
        "(a jsonl store has no standbys)"
    )


def test_the_environment_fills_in_what_the_flags_leave_out(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fixture = tmp_path / "session.jsonl"
    fixture.write_text("")
    monkeypatch.setenv("ACP_REPLAY_FILE", str(fixture))
    chosen = config()
    assert (chosen.sessions_dir, chosen.store, chosen.replay) == (tmp_path, None, fixture)
    monkeypatch.setenv("ACP_SERVER_STORE", "bogus://")
    with pytest.raises(ServeFlagsError, match=r"^ACP_SERVER_STORE: unknown store URL scheme"):
        config()
    assert config("--sessions-dir", str(tmp_path)).store is None  # the flag wins


def test_a_live_providers_replay_fixture_variable_is_not_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ACP_REPLAY_FILE", "/no/such/fixture")
    chosen = config("--provider", "openai", "--model", "m", "--api-key-env", "NO_SUCH_KEY")
    assert (chosen.provider, chosen.model, chosen.replay) == ("openai", "m", None)


def test_system_prompt_file_is_read_at_start_as_the_prompts_fixed_text(tmp_path: Path) -> None:
    path = tmp_path / "prompt.md"
    path.write_text("You review code.\n")
    chosen = config("--system-prompt-file", str(path))
    assert chosen.system_prompt == PromptBase("You review code.\n", str(path))
    assert config().system_prompt is None


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "no such file or directory: {path}"),
        ("dir", "not a regular file: {path}"),
        (b"\n", "{path} is empty: it must hold the system prompt's text"),
        (b"\xff", "{path} is not UTF-8 text"),
        (b"x" * (256 * 1024 + 1), "{path} is over 256 KiB"),
    ],
)
def test_an_unusable_system_prompt_file_is_one_message(
    tmp_path: Path, content: bytes | str | None, problem: str
) -> None:
    path = tmp_path / "prompt.md"
    if content == "dir":
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    with pytest.raises(ServeFlagsError) as raised:
        config("--system-prompt-file", str(path))
    assert str(raised.value) == "--system-prompt-file: " + problem.format(path=path)


def test_a_permission_request_with_no_client_attached_waits_600_seconds_by_default() -> None:
    assert config().detached_permission_timeout == 600.0


def test_detached_permission_timeout_sets_how_long_it_waits() -> None:
    assert config("--detached-permission-timeout", "2.5").detached_permission_timeout == 2.5


def test_the_store_retry_window_is_thirty_seconds_unless_given() -> None:
    assert (config().store_retry, config("--store-retry", "2.5").store_retry) == (30.0, 2.5)


def test_a_store_retry_of_zero_fails_at_once() -> None:
    assert config("--store-retry", "0").store_retry == 0.0


@pytest.mark.parametrize("value", ["-1", "inf", "soon"])
def test_a_store_retry_that_is_not_seconds_is_refused(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        config("--store-retry", value)
    assert "argument --store-retry:" in capsys.readouterr().err


def test_the_store_retry_window_reaches_a_postgresql_store() -> None:
    from acp_server.server.app import open_config_store
    from acp_server.storage.sql.postgres import PostgresStore

    store = open_config_store(
        config("--store", "postgresql://acp@db.invalid/acp", "--store-retry", "7")
    )
    assert isinstance(store, PostgresStore)
    assert store.retry_seconds == 7.0
