"""The one subprocess driver (`acp_server.client.process`), over small stand-in programs."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest
from polling import TIMEOUT

from acp_server.client.process import ServerProcess

pytestmark = pytest.mark.process

ECHO_UNTIL_EOF = """
import sys, time
for line in sys.stdin:
    sys.stdout.write("got " + line)
    sys.stdout.flush()
sys.stdout.write("eof\\n")
sys.stdout.flush()
time.sleep(600)
"""
"""Echoes its input; at the end of input it says so, then lingers as a server shutting down."""


def echo_until_eof() -> ServerProcess:
    return ServerProcess([sys.executable, "-c", ECHO_UNTIL_EOF])


def test_lines_come_back_in_order_without_their_newlines() -> None:
    with echo_until_eof() as process:
        process.send_raw(b"one\ntwo\n")
        assert [process.next_line(TIMEOUT), process.next_line(TIMEOUT)] == [b"got one", b"got two"]
        process.kill()
    assert process.stdout_lines == [b"got one", b"got two"]


def test_kill_never_lets_the_server_see_the_end_of_its_input() -> None:
    with echo_until_eof() as process:
        process.send_raw(b"ping\n")
        assert process.next_line(TIMEOUT) == b"got ping"
        process.kill()
    assert process.process.returncode == -signal.SIGKILL
    assert process.stdout_lines == [b"got ping"]


def test_close_ends_the_input_then_kills_a_server_that_does_not_exit() -> None:
    with echo_until_eof() as process:
        process.close(timeout=0)
    assert process.stdout_lines in ([], [b"eof"])  # killed at once: it may not have said it
    assert process.process.returncode == -signal.SIGKILL


def test_the_bytes_after_the_last_newline_are_the_tail() -> None:
    with ServerProcess([sys.executable, "-c", "print('whole'); print('torn', end='')"]) as process:
        assert process.wait(TIMEOUT) == 0
        assert process.next_line(TIMEOUT) == b"whole"
        assert process.next_line(TIMEOUT) is None
    assert process.stdout_tail == b"torn"


def test_stderr_is_kept_whole() -> None:
    program = "import sys; sys.stderr.write('x' * 200_000 + 'end')"
    with ServerProcess([sys.executable, "-c", program]) as process:
        assert process.wait(TIMEOUT) == 0
    assert process.stderr == "x" * 200_000 + "end"


def test_writing_to_a_server_that_has_gone_is_a_broken_pipe() -> None:
    with ServerProcess([sys.executable, "-c", "pass"]) as process:
        assert process.wait(TIMEOUT) == 0
        with pytest.raises(BrokenPipeError):
            for _ in range(100):  # the first writes may land in the pipe's buffer
                process.send_raw(b"x" * 65536)


def test_wait_past_its_timeout_is_timeout_expired() -> None:
    with echo_until_eof() as process:
        with pytest.raises(subprocess.TimeoutExpired):
            process.wait(0)
        process.kill()


def test_close_lets_a_server_that_exits_at_the_end_of_its_input_exit_cleanly() -> None:
    with ServerProcess([sys.executable, "-c", "import sys; sys.stdin.read()"]) as process:
        process.close()
    assert process.process.returncode == 0
