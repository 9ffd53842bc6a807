"""The README's commands and code examples, run as written.

Every fenced block of README.md follows a marker line, `<!-- snippet: NAME -->` (an HTML comment,
so nothing shows on the rendered page), and every name has its test here: a block without a
marker, or a marker no test knows, fails `test_every_readme_block_is_a_snippet_run_here`.

The examples run in a world of their own: `HOME` is a fresh directory (so the default sessions
directory is too), the quick start's checkout is `$HOME/acp-server` (the README's `/home/me/
acp-server`), whose `.venv/bin` holds `acp-server` and `python`, small scripts that run this
checkout's server with this interpreter, and is first on `PATH`, as an activated environment
would be; the project is a directory holding the demo's `hello.py`. The Node examples run on the
packages `tests/node_packages.py` installs (the TypeScript SDK's current release, acpx).

The quick start's first command runs verbatim in a copy of the checkout (it installs from the
package index); its second is what `.ci/run` runs, so it is checked against that file.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from acp_process import AcpProcess
from interop_support import HELLO_AFTER, HELLO_BEFORE
from node_packages import PACKAGES, node_with_packages
from unavailable import unavailable

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
README_HOME = "/home/me"
"""The home directory the README's paths are written in."""

SNIPPET = re.compile(r"^<!-- snippet: ([a-z0-9-]+) -->\n```(\w*)\n(.*?)^```$", re.M | re.S)
FENCE = re.compile(r"^```", re.M)


@dataclass(frozen=True)
class Snippet:
    language: str
    text: str

    def lines(self) -> list[str]:
        """The block's non-empty lines."""
        return [line for line in self.text.splitlines() if line.strip()]


def readme_snippets() -> dict[str, Snippet]:
    text = README.read_text(encoding="utf-8")
    found: dict[str, Snippet] = {}
    for match in SNIPPET.finditer(text):
        name, language, body = match.groups()
        assert name not in found, f"README.md: two snippets named {name!r}"
        found[name] = Snippet(language, body)
    return found


def snippet(name: str) -> Snippet:
    return readme_snippets()[name]


RUN_HERE = {
    "quick-start",
    "quick-start-tests",
    "zed-settings",
    "acpx",
    "python-sdk",
    "typescript-sdk",
    "replay",
    "record-live",
    "draft-script",
    "draft-commands",
    "store-sqlite",
}
"""The snippets the tests below run (or, for the test command, check against CI)."""


def test_every_readme_block_is_a_snippet_run_here() -> None:
    fences = len(FENCE.findall(README.read_text(encoding="utf-8")))
    assert fences == 2 * len(readme_snippets()), "a fenced block of README.md has no marker"
    assert set(readme_snippets()) == RUN_HERE


def test_the_quick_start_is_two_commands_of_one_line_each() -> None:
    assert [len(snippet(name).lines()) for name in ("quick-start", "quick-start-tests")] == [1, 1]


def test_the_readme_test_command_is_what_ci_runs() -> None:
    """Each command of the README's test line (less the virtual environment's path) is a line
    of `.ci/run`, whose extra flags are its own."""
    ci = [
        shlex.split(line, comments=True) for line in (REPO / ".ci" / "run").read_text().splitlines()
    ]
    (line,) = snippet("quick-start-tests").lines()
    for command in line.split("&&"):
        words = [w.removeprefix(".venv/bin/") for w in shlex.split(command) if w != ".venv"]
        assert any(_in_order(words, ci_words) for ci_words in ci), (
            f"{command.strip()!r} is not run by .ci/run"
        )


def _in_order(words: list[str], within: list[str]) -> bool:
    rest = iter(within)
    return all(word in rest for word in words)


# -- the world the examples run in ---------------------------------------------------------------


@dataclass(frozen=True)
class World:
    home: Path
    bin: Path
    project: Path

    def from_readme(self, text: str) -> str:
        """`text` with the README's home directory replaced by this world's."""
        return text.replace(README_HOME, str(self.home))


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    home = tmp_path / "home"
    bin_dir = home / "acp-server" / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, command in (
        ("acp-server", f"{shlex.quote(sys.executable)} -m acp_server"),
        ("python", shlex.quote(sys.executable)),
    ):
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\nexec {command} "$@"\n')
        script.chmod(0o755)
    project = tmp_path / "project"
    project.mkdir()
    (project / "hello.py").write_text(HELLO_BEFORE)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    for name in (
        "XDG_DATA_HOME",
        "XDG_CONFIG_HOME",
        "ACP_SERVER_STORE",
        "ACP_SERVER_SESSIONS_DIR",
        "ACP_REPLAY_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    return World(home, bin_dir, project)


def shell(line: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run one README line with `sh`, its input empty."""
    return subprocess.run(
        ["sh", "-c", line],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def serving(line: str, cwd: Path) -> AcpProcess:
    """The server one README line starts (through `sh`, in `cwd`)."""
    return AcpProcess(None, command=["sh", "-c", f"cd {shlex.quote(str(cwd))} && exec {line}"])


def allow_once(frame: dict[str, Any]) -> Any:
    assert frame["method"] == "session/request_permission", frame
    return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}


def prompt_once(server: AcpProcess, cwd: Path, text: str) -> tuple[str, list[dict[str, Any]]]:
    """initialize, session/new in `cwd` and one prompt: its stop reason and its updates."""
    server.initialize()
    session_id = server.result("session/new", {"cwd": str(cwd), "mcpServers": []})["sessionId"]
    response, before = server.exchange(
        "session/prompt",
        {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
        answer=allow_once,
    )
    updates = [f["params"]["update"] for f in before if f.get("method") == "session/update"]
    return response["result"]["stopReason"], updates


def agent_text(updates: list[dict[str, Any]]) -> str:
    return "".join(
        u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"
    )


# -- the quick start -------------------------------------------------------------------------------

INDEX_UNREACHABLE = ("Failed to establish a new connection", "No matching distribution found")
"""What pip says when it cannot reach the package index."""


@pytest.mark.process
def test_the_quick_start_installs_the_server_and_runs_the_demo(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=False,
    )
    if listed.returncode != 0:
        unavailable("the checkout's files are listed by git, which cannot list them here")
    checkout = tmp_path / "checkout"
    for name in listed.stdout.decode().split("\0"):
        source = REPO / name
        if name and source.is_file():
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, checkout / name)
    # The installed package must be the one that runs, not this checkout's.
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    (line,) = snippet("quick-start").lines()
    run = shell(line, checkout, timeout=900)
    output = run.stdout + run.stderr
    if run.returncode != 0 and any(words in output for words in INDEX_UNREACHABLE):
        unavailable(f"pip cannot reach the package index to install the server:\n{output[-2000:]}")
    assert run.returncode == 0, output[-4000:]
    assert "Traceback" not in output


# -- editors and clients -------------------------------------------------------------------------


@pytest.mark.process
def test_the_zed_settings_start_a_server_that_keeps_sessions_in_the_named_directory(
    world: World,
) -> None:
    entry = json.loads(world.from_readme(snippet("zed-settings").text))["agent_servers"][
        "acp-server"
    ]
    assert Path(entry["command"]) == world.bin / "acp-server"
    server = AcpProcess(None, command=[entry["command"], *entry["args"]], env=entry["env"])
    try:
        server.initialize()
        session = server.result("session/new", {"cwd": str(world.project), "mcpServers": []})
        assert server.finish() == 0, server.stderr
    finally:
        server.close()
    sessions = Path(entry["args"][entry["args"].index("--sessions-dir") + 1])
    assert [p.name for p in sessions.iterdir()] == [session["sessionId"]]


@pytest.mark.process
def test_the_acpx_example_fixes_the_greeting_and_lists_the_session(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    node_with_packages("the README's acpx example")
    # `acpx` on PATH, as `npm install -g acpx` leaves it: the version package.json pins.
    monkeypatch.setenv(
        "PATH", f"{PACKAGES / 'node_modules' / '.bin'}{os.pathsep}{os.environ['PATH']}"
    )
    fix, listing = world.from_readme(snippet("acpx").text).splitlines()
    fixed = shell(fix, world.project)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert (world.project / "hello.py").read_text() == HELLO_AFTER
    listed = shell(listing, world.project)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    (session,) = listed.stdout.splitlines()
    assert session.split("\t")[2] == str(world.project)


@pytest.mark.process
def test_the_python_sdk_example_fixes_the_greeting(world: World) -> None:
    (world.project / "client.py").write_text(snippet("python-sdk").text)
    assert_fixes_the_greeting(world, [sys.executable, "client.py"])


@pytest.mark.process
def test_the_typescript_sdk_example_fixes_the_greeting(world: World) -> None:
    node = node_with_packages("the README's TypeScript example")
    (world.project / "client.mjs").write_text(snippet("typescript-sdk").text)
    # The example imports the SDK as an installed package: the one the interop test pins.
    (world.project / "node_modules").symlink_to(PACKAGES / "node_modules")
    assert_fixes_the_greeting(world, [node, "client.mjs"])


def assert_fixes_the_greeting(world: World, client: list[str]) -> None:
    """Run an example client in the project: it ends the demo's turn, the greeting fixed."""
    run = subprocess.run(
        client, cwd=world.project, capture_output=True, text=True, timeout=120, check=False
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines()[-1] == "[end_turn]"
    assert (world.project / "hello.py").read_text() == HELLO_AFTER


# -- recording, replaying, fixtures ---------------------------------------------------------------


def first_recorded_answer(fixture: Path) -> str:
    """The text of the first assistant message of a fixture."""
    for line in fixture.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("type") == "assistant/message":
            blocks = record["data"]["message"]["content"]
            return "".join(b["text"] for b in blocks if b["type"] == "text")
    raise AssertionError(f"{fixture}: no assistant message")


@pytest.mark.process
@pytest.mark.parametrize("index", [0, 1])
def test_the_replay_command_serves_the_recorded_answer(world: World, index: int) -> None:
    line = snippet("replay").lines()[index]
    server = serving(line, REPO)
    try:
        stop, updates = prompt_once(server, world.project, "How should I store money?")
        assert server.finish() == 0, server.stderr
    finally:
        server.close()
    assert stop == "end_turn"
    expected = first_recorded_answer(REPO / "snapshots" / "plain-text" / "session.jsonl")
    assert agent_text(updates) == expected


@pytest.mark.process
def test_the_recording_commands_start_a_live_server_and_export_a_session(world: World) -> None:
    export_key, serve, export = snippet("record-live").lines()
    started = shell(f"{export_key}\n{serve}", world.project)
    assert (started.returncode, started.stderr) == (0, "")
    # A session to export, made where the README's server keeps them (its model: a replay).
    server = serving(f"{serve.split('--provider')[0]} --sessions-dir ./sessions", world.project)
    try:
        server.initialize()
        session = server.result("session/new", {"cwd": str(world.project), "mcpServers": []})
        assert server.finish() == 0, server.stderr
    finally:
        server.close()
    exported = shell(export.replace("<session-id>", session["sessionId"]), world.project)
    assert exported.returncode == 0, exported.stderr
    assert (world.project / "my-scenario" / "session.jsonl").is_file()


@pytest.mark.process
def test_the_scripted_fixture_is_served_as_scripted(world: World) -> None:
    script = json.loads(snippet("draft-script").text)
    (world.project / "greeting.json").write_text(snippet("draft-script").text)
    draft, serve = snippet("draft-commands").lines()
    drafted = shell(draft, world.project)
    assert (drafted.returncode, drafted.stdout) == (0, "wrote greeting/session.jsonl\n")
    server = serving(serve, world.project)
    try:
        stop, updates = prompt_once(server, world.project, "What does hello.py print?")
        assert server.finish() == 0, server.stderr
    finally:
        server.close()
    assert stop == "end_turn"
    assert agent_text(updates) == "".join(call["text"] for call in script["calls"])
    calls = [u for u in updates if u["sessionUpdate"] in ("tool_call", "tool_call_update")]
    assert [(u["toolCallId"], u.get("status")) for u in calls][-1] == ("call_1", "completed")


# -- stores -----------------------------------------------------------------------------------------


@pytest.mark.process
def test_the_sqlite_store_commands_set_up_and_serve_a_database(world: World) -> None:
    make_directory, init, serve = snippet("store-sqlite").lines()
    database = world.home / ".local" / "share" / "acp-server" / "sessions.db"
    assert shell(make_directory, world.project).returncode == 0
    initialized = shell(init, world.project)
    assert (initialized.returncode, initialized.stdout) == (0, f"sqlite:///{database}: ready\n")
    server = serving(serve, world.project)
    try:
        server.initialize()
        server.result("session/new", {"cwd": str(world.project), "mcpServers": []})
        assert server.finish() == 0, server.stderr
    finally:
        server.close()
    assert database.is_file()


# -- links ----------------------------------------------------------------------------------------

LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCED = re.compile(r"^```.*?^```$", re.M | re.S)


def heading_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a page's headings."""
    headings = re.findall(r"^#+ (.+)$", FENCED.sub("", markdown), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize(
    "page",
    [README, *sorted((REPO / "docs").rglob("*.md"))],
    ids=lambda p: str(p.relative_to(REPO)),
)
def test_every_relative_link_names_a_file_and_heading_that_exist(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    broken = []
    for target in LINK.findall(FENCED.sub("", text)):
        if re.match(r"[a-z]+:", target):
            continue  # a URL
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        found = linked.exists() and (
            not anchor or anchor in heading_anchors(linked.read_text(encoding="utf-8"))
        )
        if not found:
            broken.append(target)
    assert broken == []
