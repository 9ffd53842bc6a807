"""The fast tier's guard (`process_guard`): an unmarked test that starts a process or a server
fails, naming the marker, whether it starts it in the test, in a fixture or where the failure is
swallowed; nothing is started."""

from __future__ import annotations

import pytest

PLANTED = """
import socket
import subprocess
import sys

import pytest


def test_runs_a_program():
    subprocess.run([sys.executable, "-c", "pass"])


def test_swallows_the_refusal():
    try:
        subprocess.run([sys.executable, "-c", "pass"])
    except BaseException:
        pass


@pytest.fixture(scope="module")
def server():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener


def test_uses_a_server_fixture(server):
    pass


def test_stays_in_process():
    assert sum([1, 2]) == 3
"""


def test_an_unmarked_test_that_starts_a_process_or_a_server_fails_naming_the_marker(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_planted=PLANTED)
    result = pytester.runpytest_inprocess("-p", "process_guard", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=2, errors=1)
    fix = (
        "is not marked `process`: mark it `@pytest.mark.process` (or its file "
        '`pytestmark = pytest.mark.process`), so that `pytest -m "not process"` stays the fast tier'
    )
    result.stdout.fnmatch_lines(
        [
            # the errors (in setup) come first, then the failures
            f"*test_planted.py::test_uses_a_server_fixture starts a server (a socket listens) but {fix}",
            f"*test_planted.py::test_runs_a_program starts a subprocess but {fix}",
            f"*test_planted.py::test_swallows_the_refusal starts a subprocess but {fix}",
        ]
    )
