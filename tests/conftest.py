"""Hypothesis profiles; the guard that keeps the fast tier fast (`process_guard`); the PostgreSQL
server of the tests that need one (`postgres_url`), and a primary with a streaming standby
(`postgres_pair`); the npm packages, installed once before the
tests run (`node_packages`).

Hypothesis: "ci" (no deadline, 100 examples) is what the whole suite runs, CI included; "fast"
(no deadline, 20 examples) is what the fast tier, `pytest -m "not process"`, runs unless
`--hypothesis-profile` names another: the same properties, each tried on fewer examples between
edits (the whole suite tries them on all 100).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

if TYPE_CHECKING:
    from postgres_server import StandbyPair

settings.register_profile("ci", deadline=None, max_examples=100)
settings.register_profile("fast", deadline=None, max_examples=20)
settings.load_profile("ci")


def pytest_configure(config: pytest.Config) -> None:
    if "not process" in config.option.markexpr and config.option.hypothesis_profile is None:
        settings.load_profile("fast")


def pytest_sessionstart(session: pytest.Session) -> None:
    # Fast tests hold frames to the ACP schema inside an npm package (`sdk_schema`): installed
    # here, before any test, so that none of them has to start npm.
    from node_packages import install_packages

    install_packages()


pytest_plugins = ["process_guard", "pytester"]


# anyio's pytest plugin runs `@pytest.mark.anyio` tests on the backends this fixture names.
@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True, scope="session")
def _private_config_dir(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every server the tests start keeps its stored credentials (SPEC 4.4) in a directory of
    the run's own, never in the user's config directory: `logout` removes them."""
    os.environ["ACP_SERVER_CONFIG_DIR"] = str(tmp_path_factory.mktemp("config"))


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The URL of a PostgreSQL server for the test session (see `postgres_server.py`)."""
    from postgres_server import ENV, Cluster, server_binaries
    from unavailable import unavailable

    given = os.environ.get(ENV)
    if given:
        yield given
        return
    binaries = server_binaries()
    if binaries is None:
        unavailable(f"no PostgreSQL server: set {ENV} or install PostgreSQL's server binaries")
    cluster = Cluster(binaries)
    try:
        yield cluster.start()
    finally:
        cluster.stop()


@pytest.fixture
def postgres_url(postgres_server: str) -> str:
    """A new, empty database of its own for one test."""
    from postgres_server import fresh_database

    return fresh_database(postgres_server)


@pytest.fixture
def postgres_pair() -> Iterator[StandbyPair]:
    """A primary and a streaming standby of its own for one test, from Debian's binaries (see
    `postgres_server.StandbyPair`): the test may promote, stop and restart them."""
    from postgres_server import StandbyPair, debian_binaries
    from unavailable import unavailable

    binaries = debian_binaries()
    if binaries is None:
        unavailable(
            "no PostgreSQL server directory with initdb, pg_ctl and pg_basebackup "
            "under /usr/lib/postgresql/*/bin"
        )
    pair = StandbyPair(binaries)
    try:
        pair.start()
        yield pair
    finally:
        pair.stop()
