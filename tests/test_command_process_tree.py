"""A local command is killed with its whole process tree (SPEC 4.3: killed at the timeout): a
descendant that left the command's session with `setsid()`, even one whose parent has exited,
does not outlive the command.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from fixtures_builder import Scenario, Step, ToolUse, args
from local_tools import call_locally
from polling import TIMEOUT, poll, wait_for, wait_until
from prompt_harness import PromptServer

from acp_server.agent.tools import ToolOutcome
from acp_server.agent.tools.process_tree import kill_tree, members, new_mark

pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]

TIMEOUT_MS = 5000
"""Long enough for the command to start its descendant before it is killed."""

DAEMON = (
    "import os, sys, time\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    if os.fork() == 0:\n"
    "        open('daemon.tmp', 'w').write(str(os.getpid()))\n"
    "        os.rename('daemon.tmp', 'daemon.pid')  # whole or absent to a reader\n"
    "        time.sleep(60)\n"
    "    os._exit(0)  # the daemon's parent is gone: it is reparented, out of the tree\n"
    "while not os.path.exists('daemon.pid'):\n"
    "    time.sleep(0.01)\n"
)
"""A command whose grandchild calls `setsid()` through a parent that exits at once."""


async def run_command(cwd: Path, code: str, **extra: Any) -> ToolOutcome:
    return await call_locally(
        cwd, "run_command", {"command": sys.executable, "args": ["-c", code], **extra}
    )


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie awaiting its reaper counts as gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return False
    return fields[0] != "Z"


def gone_soon(pid: int) -> bool:
    return poll(lambda: not alive(pid), 5)


def pid_in(path: Path) -> int:
    return int(path.read_text())


@pytest.mark.anyio
async def test_a_timeout_kills_a_descendant_that_called_setsid(tmp_path: Path) -> None:
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    open('child.tmp', 'w').write(str(os.getpid()))\n"
        "    os.rename('child.tmp', 'child.pid')\n"
        "time.sleep(60)\n"
    )
    outcome = await run_command(tmp_path, code, timeoutMs=TIMEOUT_MS)
    assert outcome.raw_output["timedOut"] is True
    assert gone_soon(pid_in(tmp_path / "child.pid")) is True


@pytest.mark.anyio
async def test_a_timeout_kills_a_setsid_descendant_whose_parent_has_exited(tmp_path: Path) -> None:
    code = DAEMON + "time.sleep(60)\n"
    outcome = await run_command(tmp_path, code, timeoutMs=TIMEOUT_MS)
    assert outcome.raw_output["timedOut"] is True
    assert gone_soon(pid_in(tmp_path / "daemon.pid")) is True


@pytest.mark.anyio
async def test_a_command_that_exits_is_not_over_while_its_daemon_holds_its_output(
    tmp_path: Path,
) -> None:
    # The command itself exits at once; its daemon keeps the output pipe open, so the call
    # runs to the timeout, and the daemon is killed there.
    outcome = await run_command(tmp_path, DAEMON, timeoutMs=TIMEOUT_MS)
    assert outcome.raw_output["timedOut"] is True
    assert gone_soon(pid_in(tmp_path / "daemon.pid")) is True


@pytest.mark.anyio
async def test_cancelling_a_command_kills_a_descendant_that_called_setsid(tmp_path: Path) -> None:
    code = DAEMON + "time.sleep(60)\n"
    daemon = tmp_path / "daemon.pid"
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run_command, tmp_path, code)
            await wait_for(lambda: daemon.exists())
            tg.cancel_scope.cancel()
    assert gone_soon(pid_in(daemon)) is True


def test_the_members_of_a_tree_are_its_root_its_descendants_and_its_marked_processes(
    tmp_path: Path,
) -> None:
    mark = new_mark()
    env = {**os.environ, "ACP_SERVER_COMMAND": mark}
    code = DAEMON + "time.sleep(60)\n"
    root = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, env=env)
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert poll(lambda: (tmp_path / "daemon.pid").exists(), 30) is True
        daemon = pid_in(tmp_path / "daemon.pid")
        found = members(root.pid, mark)
        assert (root.pid in found, daemon in found, stranger.pid in found) == (True, True, False)
        kill_tree(root.pid, mark)
        assert (root.wait(30), gone_soon(daemon), stranger.poll()) == (-9, True, None)
    finally:
        stranger.kill()
        stranger.wait()
        root.kill()
        root.wait()


def test_a_server_shut_down_by_sigterm_kills_its_running_commands_whole_tree(
    tmp_path: Path,
) -> None:
    call = ToolUse("call_run", "run_command", args(command=sys.executable, args=["-c", DAEMON]))
    server = PromptServer(tmp_path, Scenario([("run", [Step(calls=[call])])]))
    daemon = server.workspace / "daemon.pid"
    try:
        server.client.permissions.append("allow_once")
        session = server.new_session()
        server.send_request("session/prompt", server.prompt_params(session, "run"))
        while True:  # up to the command's start, allowing it on the way
            frame = server.process.read_frame()
            if frame.get("method") == "session/request_permission":
                server.reply(frame["id"], server.client.answer(frame))
            elif frame["params"]["update"].get("status") == "in_progress":
                break
        wait_until(lambda: daemon.exists(), "the daemon started")
        os.kill(server.process.pipes.process.pid, signal.SIGTERM)
        # Killing the command's tree is part of a shutdown that completes: the turn ends
        # cancelled and its log is closed, so the status is 0.
        assert server.process.wait(TIMEOUT) == 0
    finally:
        server.process.kill()
    assert gone_soon(pid_in(daemon)) is True
