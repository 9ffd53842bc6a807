"""A PostgreSQL server for the tests of the PostgreSQL store (SPEC 2.6).

`ACP_TEST_POSTGRES_URL` names one to use (a database the tests may create databases on);
otherwise, where PostgreSQL's server binaries are installed, a throwaway cluster is started in
a temporary directory on a free loopback port for the whole test session, and stopped at its
end. As root the server must run as the `postgres` user (`runuser`). With neither, the tests
that need it are skipped, saying why (a failure in CI: `tests/unavailable.py`).

`StandbyPair` is a primary and a streaming standby (`pg_basebackup -R`), both from one of
Debian's server directories (`pg_basebackup` is not always beside `initdb` on PATH), for the
tests of reading from standbys and of failover: it promotes the standby, stops and restarts
either server, and makes the standby lag by pausing its replay.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Literal

ENV: str = "ACP_TEST_POSTGRES_URL"
_BIN_GLOB = "/usr/lib/postgresql/*/bin"
_PAIR_TOOLS = ("initdb", "pg_ctl", "pg_basebackup", "postgres")
StopMode = Literal["smart", "fast", "immediate"]


def server_binaries() -> Path | None:
    """The directory of `initdb` and `pg_ctl`: on PATH, or Debian's newest."""
    found = shutil.which("pg_ctl")
    if found is not None and shutil.which("initdb") is not None:
        return Path(found).parent
    candidates = sorted(glob.glob(_BIN_GLOB), key=lambda p: int(p.split("/")[-2]))
    for directory in reversed(candidates):
        if (Path(directory) / "initdb").exists():
            return Path(directory)
    return None


def debian_binaries() -> Path | None:
    """Debian's newest server directory that holds every binary a `StandbyPair` runs."""
    candidates = sorted(glob.glob(_BIN_GLOB), key=lambda p: int(p.split("/")[-2]))
    for directory in reversed(candidates):
        if all((Path(directory) / tool).exists() for tool in _PAIR_TOOLS):
            return Path(directory)
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


class Cluster:
    """A throwaway cluster in a temporary directory of its own (data, socket and log), run as
    `postgres` when run as root: outside pytest's temporary directories, which only root may
    enter."""

    def __init__(self, binaries: Path) -> None:
        self.binaries = binaries
        self.root = Path(tempfile.mkdtemp(prefix="acp-test-postgres-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.as_root = os.geteuid() == 0
        self.settings: tuple[str, ...] = ()
        if self.as_root:
            shutil.chown(self.root, "postgres")

    @property
    def url(self) -> str:
        """Its `postgres` database (user postgres, trust on loopback)."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.binaries / tool), *args]
        if self.as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} failed ({done.returncode}): {done.stderr or done.stdout}")

    def start(self, *settings: str) -> str:
        """Initialise and start the cluster; its URL (user postgres, trust on loopback).
        `settings` are more server settings, each `name=value` (`wal_level=logical`), kept for
        every later start of its server."""
        self.settings = settings
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        self.run_server()
        return self.url

    def run_server(self) -> None:
        """Start the server of the data directory there is (waiting until it accepts)."""
        options = f"-k {self.root} -h 127.0.0.1 -p {self.port} -c fsync=off"
        options += "".join(f" -c {setting}" for setting in self.settings)
        log = str(self.root / "server.log")
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", log, "-w", "start")

    def stop_server(self, mode: StopMode = "fast") -> None:
        """Stop the server, keeping its data (`immediate`: as if it crashed)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def restart(self, mode: StopMode = "fast") -> None:
        """Stop the server and start it again, on the same port and data directory (`fast`:
        sessions ended and a clean shutdown; `immediate`: as a crash, recovered from the WAL)."""
        self.stop_server(mode)
        self.run_server()

    def stop(self) -> None:
        """Stop the server if it runs, and remove everything of the cluster."""
        try:
            if (self.data / "postmaster.pid").exists():
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def log_text(self) -> str:
        """What the server logged (for a failing test's message)."""
        try:
            return (self.root / "server.log").read_text(errors="replace")
        except OSError:
            return ""


def _query(url: str, statement: str, params: tuple[Any, ...] = ()) -> Any:
    """The first column of the first row `statement` returns (autocommit; None for one that
    returns no rows, as `ALTER SYSTEM`)."""
    import psycopg

    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        cur = conn.execute(statement, params)
        row = cur.fetchone() if cur.description else None
    return None if row is None else row[0]


class StandbyPair:
    """A primary and a streaming standby of it, each a `Cluster` on its own port.

    `url` names both hosts, the primary first, as an operator's multi-host store URL would;
    `primary.url` and `standby.url` each name one. `synchronous`: the primary waits for the
    standby to have each commit (`synchronous_standby_names = '*'`).
    """

    def __init__(self, binaries: Path, *, synchronous: bool = False) -> None:
        self.binaries = binaries
        self.synchronous = synchronous
        self.primary = Cluster(binaries)
        self.standby = Cluster(binaries)
        self.promoted = False

    @property
    def url(self) -> str:
        """Both servers' `postgres` database in one URL (libpq's host list)."""
        return (
            "postgresql://postgres@"
            f"127.0.0.1:{self.primary.port},127.0.0.1:{self.standby.port}/postgres"
        )

    def start(self) -> None:
        """Start the primary, copy it with `pg_basebackup -R` and start the copy streaming."""
        self.primary.start()
        self.standby._run(
            "pg_basebackup",
            *("-D", str(self.standby.data), "-h", "127.0.0.1", "-p", str(self.primary.port)),
            *("-U", "postgres", "-R", "-X", "stream", "--no-sync"),
        )
        self.standby.run_server()
        self.wait_streaming()
        if self.synchronous:
            _query(self.primary.url, "ALTER SYSTEM SET synchronous_standby_names = '*'")
            _query(self.primary.url, "SELECT pg_reload_conf()")
            self._wait(
                lambda: (
                    _query(self.primary.url, "SELECT sync_state FROM pg_stat_replication") == "sync"
                ),
                "the primary waits for the standby's flush of each commit",
            )

    def wait_streaming(self, timeout: float = 60.0) -> None:
        """Until the primary sees the standby streaming (`pg_stat_replication`)."""
        self._wait(
            lambda: (
                _query(
                    self.primary.url,
                    "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'",
                )
                == 1
            ),
            "the standby streams from the primary",
            timeout,
        )

    def primary_lsn(self) -> str:
        return str(_query(self.primary.url, "SELECT pg_current_wal_lsn()::text"))

    def wait_in_step(self, timeout: float = 60.0) -> None:
        """Until the standby has replayed everything the primary had written when called."""
        target = self.primary_lsn()
        self._wait(
            lambda: (
                _query(
                    self.standby.url,
                    "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn",
                    (target,),
                )
                is True
            ),
            f"the standby replays up to {target}",
            timeout,
        )

    def pause_replay(self) -> None:
        """Make the standby lag: it keeps receiving WAL but applies none until resumed."""
        _query(self.standby.url, "SELECT pg_wal_replay_pause()")
        self._wait(
            lambda: _query(self.standby.url, "SELECT pg_get_wal_replay_pause_state()") == "paused",
            "the standby's replay is paused",
        )

    def resume_replay(self) -> None:
        _query(self.standby.url, "SELECT pg_wal_replay_resume()")

    def stop_primary(self, mode: StopMode = "immediate") -> None:
        """Stop the primary (`immediate`: as if its machine went away)."""
        self.primary.stop_server(mode)

    def restart_primary(self, mode: StopMode = "fast") -> None:
        """Stop the primary and start it again on the same port (the standby reconnects)."""
        self.primary.stop_server(mode)
        self.primary.run_server()

    def restart_standby(self, mode: StopMode = "fast") -> None:
        """Stop the standby and start it again (it resumes streaming where it stopped)."""
        self.standby.stop_server(mode)
        self.standby.run_server()

    def promote(self) -> None:
        """Make the standby a primary (waiting until it accepts writes). Stop the old primary
        first: the pair never runs two primaries."""
        self.standby._run("pg_ctl", "-D", str(self.standby.data), "-w", "promote")
        self.promoted = True
        self._wait(
            lambda: _query(self.standby.url, "SELECT pg_is_in_recovery()") is False,
            "the promoted standby accepts writes",
        )

    def stop(self) -> None:
        try:
            self.standby.stop()
        finally:
            self.primary.stop()

    def _wait(self, condition: Any, what: str, timeout: float = 60.0) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            try:
                if condition():
                    return
            except psycopg.OperationalError:
                pass  # not accepting connections yet
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"timed out waiting until {what}\nprimary log:\n"
                    f"{self.primary.log_text()[-2000:]}\nstandby log:\n"
                    f"{self.standby.log_text()[-2000:]}"
                )
            time.sleep(0.05)


def fresh_database(server_url: str) -> str:
    """A new, empty database on the server `server_url` names; its URL."""
    import psycopg

    name = f"acp_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = server_url.rpartition("/")
    return f"{base}/{name}"
