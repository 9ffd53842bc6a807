"""A PostgreSQL server for the tests of the PostgreSQL store (SPEC 2.6).

`ACP_TEST_POSTGRES_URL` names one to use (a database the tests may create databases on);
otherwise, where PostgreSQL's server binaries are installed, a throwaway cluster is started in
a temporary directory on a free loopback port for the whole test session, and stopped at its
end. As root the server must run as the `postgres` user (`runuser`). With neither, the tests
that need it are skipped, saying why (a failure in CI: `tests/unavailable.py`).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

ENV: str = "ACP_TEST_POSTGRES_URL"
_BIN_GLOB = "/usr/lib/postgresql/*/bin"


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

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.binaries / tool), *args]
        if self.as_root:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} failed ({done.returncode}): {done.stderr or done.stdout}")

    def start(self, *settings: str) -> str:
        """Initialise and start the cluster; its URL (user postgres, trust on loopback).
        `settings` are more server settings, each `name=value` (`wal_level=logical`)."""
        if self.as_root:
            shutil.chown(self.root, "postgres")
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        options = f"-k {self.root} -h 127.0.0.1 -p {self.port} -c fsync=off"
        options += "".join(f" -c {setting}" for setting in settings)
        log = str(self.root / "server.log")
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", log, "-w", "start")
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def fresh_database(server_url: str) -> str:
    """A new, empty database on the server `server_url` names; its URL."""
    import psycopg

    name = f"acp_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = server_url.rpartition("/")
    return f"{base}/{name}"
