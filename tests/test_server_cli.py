"""`acp-server serve` on the command line (SPEC 8): help, the default command, bad flags."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from acp_server.cli.parser import build_parser, with_default_command


def run(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "acp_server", *args], input=stdin, capture_output=True, timeout=30
    )


@pytest.mark.process
def test_serve_help_names_every_flag() -> None:
    result = run("serve", "--help")
    assert result.returncode == 0
    text = result.stdout.decode()
    for flag in (
        "--sessions-dir",
        "--replay",
        "--replay-override",
        "--pace-ms",
        "--max-steps",
        "--compression",
        "--no-pack",
        "--log-level",
        "--max-line-bytes",
    ):
        assert flag in text
    assert "serve" in run("--help").stdout.decode()


@pytest.mark.process
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--compression", "lz4"],
            "acp-server serve: error: argument --compression: invalid choice: 'lz4' (choose from 'none', 'zstd')",
        ),
        (
            ["--max-steps", "0"],
            "acp-server serve: error: argument --max-steps: must be a positive integer, got '0'",
        ),
        (
            ["--compact-at", "1.5"],
            "acp-server serve: error: argument --compact-at: must be a number from 0 to 1, got '1.5'",
        ),
        (
            ["--pace-ms", "-1"],
            "acp-server serve: error: argument --pace-ms: must not be negative, got '-1'",
        ),
        (
            ["--log-level", "loud"],
            "acp-server serve: error: argument --log-level: invalid choice: 'loud' (choose from debug, info, warning, error, critical)",
        ),
        (
            ["--replay", "/no/such/fixture"],
            "acp-server serve: error: --replay: no such file or directory: /no/such/fixture",
        ),
        (
            ["--replay-override", "/no/such/file"],
            "acp-server serve: error: --replay-override: no such file or directory: /no/such/file",
        ),
        (["--unknown-flag"], "acp-server: error: unrecognized arguments: --unknown-flag"),
        (
            ["bogus"],
            "acp-server: error: argument COMMAND: invalid choice: 'bogus' (choose from 'serve', 'login', 'logout', 'demo', 'log', 'store', 'sessions', 'fixture')",
        ),
    ],
)
def test_bad_flags_exit_2_with_one_line(args: list[str], message: str) -> None:
    result = run(*args)
    assert result.returncode == 2
    assert result.stdout == b""
    assert result.stderr.decode() == message + "\n"


@pytest.mark.process
@pytest.mark.parametrize("flag", ["--sessions-dir", "--replay", "--replay-override"])
def test_a_symlink_loop_is_named_as_one_not_as_a_missing_file(tmp_path: Path, flag: str) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    result = run("serve", flag, str(loop))
    assert (result.returncode, result.stdout) == (2, b"")
    assert result.stderr.decode() == (
        f"acp-server serve: error: {flag}: a symlink loop (too many levels of symbolic links): {loop}\n"
    )


@pytest.mark.process
def test_sessions_dir_must_be_a_directory(tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_text("x")
    result = run("--sessions-dir", str(file))
    assert (result.returncode, result.stdout) == (2, b"")
    assert (
        result.stderr.decode()
        == f"acp-server serve: error: --sessions-dir: not a directory: {file}\n"
    )


INITIALIZE = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'


@pytest.mark.process
def test_a_file_as_sessions_dir_exits_2_before_initialize_is_answered(tmp_path: Path) -> None:
    file = tmp_path / "file"
    file.write_text("x")
    result = run("--sessions-dir", str(file), stdin=INITIALIZE)
    assert (result.returncode, result.stdout) == (2, b"")
    assert (
        result.stderr.decode()
        == f"acp-server serve: error: --sessions-dir: not a directory: {file}\n"
    )


@pytest.mark.process
def test_a_sessions_dir_that_cannot_be_made_exits_2_before_initialize_is_answered() -> None:
    result = run("--sessions-dir", "/proc/nope", stdin=INITIALIZE)
    assert (result.returncode, result.stdout) == (2, b"")
    assert result.stderr.decode() == (
        "acp-server serve: error: /proc/nope: cannot make the sessions directory: "
        "no such file or directory\n"
    )


@pytest.mark.process
def test_a_sessions_dir_from_the_environment_that_cannot_be_made_exits_2_before_the_answer(
    tmp_path: Path,
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "acp_server"],
        input=INITIALIZE,
        capture_output=True,
        timeout=30,
        env={**os.environ, "ACP_SERVER_SESSIONS_DIR": "/proc/nope"},
    )
    assert (result.returncode, result.stdout) == (2, b"")
    assert result.stderr.decode() == (
        "acp-server serve: error: /proc/nope: cannot make the sessions directory: "
        "no such file or directory\n"
    )


@pytest.mark.process
def test_a_missing_sessions_dir_is_made_at_start(tmp_path: Path) -> None:
    sessions = tmp_path / "a" / "sessions"
    result = run("--sessions-dir", str(sessions), stdin=INITIALIZE)
    assert (result.returncode, result.stdout.count(b"\n"), sessions.is_dir()) == (0, 1, True)


@pytest.mark.process
def test_a_relative_sqlite_url_is_refused() -> None:
    result = run("--store", "sqlite:a.db", stdin=INITIALIZE)
    assert (result.returncode, result.stdout) == (2, b"")
    assert result.stderr.decode() == (
        "acp-server serve: error: --store: sqlite:a.db: the path must be absolute "
        "(sqlite:///abs/path)\n"
    )


@pytest.mark.process
def test_serve_help_names_the_store_it_would_use_and_the_exit_statuses(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "acp_server", "serve", "--help"],
        capture_output=True,
        timeout=30,
        env={**os.environ, "ACP_SERVER_SESSIONS_DIR": str(tmp_path), "COLUMNS": "1000"},
    )
    text = " ".join(result.stdout.decode().split())
    assert f"Sessions are stored in {tmp_path} (from $ACP_SERVER_SESSIONS_DIR)." in text
    assert "2 when it could not run" in text


@pytest.mark.process
def test_serve_logs_the_store_it_uses_at_info_level(tmp_path: Path) -> None:
    result = run("--sessions-dir", str(tmp_path), "--log-level", "info")
    assert f"INFO acp_server: sessions are stored in {tmp_path} (from --sessions-dir)\n" in (
        result.stderr.decode()
    )


@pytest.mark.process
def test_an_empty_sessions_dir_is_refused_not_taken_as_the_working_directory() -> None:
    result = run("serve", "--sessions-dir", "")
    assert (result.returncode, result.stdout) == (2, b"")
    assert (
        result.stderr.decode()
        == "acp-server serve: error: argument --sessions-dir: an empty path\n"
    )


@pytest.mark.process
def test_stdin_at_eof_exits_0_with_no_output(tmp_path: Path) -> None:
    result = run("--sessions-dir", str(tmp_path))
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")


@pytest.mark.parametrize(
    "argv",
    [
        ["serve", "--pace-ms", "5", "--provider", "openai", "--model", "m", "--mode", "plan"],
        ["login"],
        ["logout"],
        ["demo", "--keep", "kept"],
        ["log", "verify", "some/dir", "--store", "sqlite:///s.db"],
        ["store", "copy", "a", "b", "--session", "s1", "--session", "s2"],
        ["fixture", "export", "d", "s", "--zero-times"],
    ],
    ids=lambda argv: argv[0],
)
def test_the_parser_of_one_command_reads_its_command_line_as_the_whole_parser_does(
    argv: list[str],
) -> None:
    assert build_parser(argv[0]).parse_args(argv) == build_parser().parse_args(argv)


@pytest.mark.parametrize("command", ["serve", "log"])
def test_a_command_line_that_names_its_command_makes_that_commands_parser_alone(
    command: str,
) -> None:
    (commands,) = (
        action
        for action in build_parser(command)._actions
        if isinstance(action, argparse._SubParsersAction)
    )
    assert list(commands.choices) == [command]


def test_serve_is_the_default_command() -> None:
    assert with_default_command([]) == ["serve"]
    assert with_default_command(["--log-level", "info"]) == ["serve", "--log-level", "info"]
    assert with_default_command(["demo"]) == ["demo"]
    assert with_default_command(["--help"]) == ["--help"]
    args = build_parser().parse_args(with_default_command(["--no-pack", "--compression", "zstd"]))
    assert (
        args.command,
        args.no_pack,
        args.compression,
        args.max_steps,
        args.pace_ms,
        args.log_level,
    ) == (
        "serve",
        True,
        "zstd",
        50,
        0,
        "warning",
    )
    assert args.max_line_bytes == 64 * 1024 * 1024


def test_replay_flags_are_stored_in_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import acp_server.cli.main as cli
    import acp_server.server.app as app

    fixture = tmp_path / "session.jsonl"
    fixture.write_text("")
    override = tmp_path / "replay.override.json"
    override.write_text("[]")
    seen = []
    monkeypatch.setattr(app, "run_server", lambda config: seen.append(config) or 0)
    monkeypatch.delenv("ACP_SERVER_SESSIONS_DIR", raising=False)
    monkeypatch.setenv("ACP_REPLAY_FILE", str(fixture))
    assert (
        cli.main(
            [
                "--sessions-dir",
                str(tmp_path),
                "--replay-override",
                str(override),
                "--pace-ms",
                "7",
                "--max-steps",
                "9",
            ]
        )
        == 0
    )
    (config,) = seen
    assert (
        config.sessions_dir,
        config.replay,
        config.replay_override,
        config.pace_ms,
        config.max_steps,
    ) == (
        tmp_path,
        fixture,
        override,
        7,
        9,
    )
    assert (config.compression, config.pack, config.log_level) == ("none", True, "warning")
