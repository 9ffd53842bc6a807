"""The browser's modules (`acp_server/web/client.js`, the client, re-exporting `decode.js`,
`journal.js`, `connection.js` and `follow.js`; `acp_server/web/fold.js`, the conversation fold):
shipped in the package, and their Node.js tests (`tests/js/*.test.mjs`, Node's own test runner,
no npm packages) pass, on the vectors the Python tests share.

Without `node` on PATH the Node tests are skipped, saying so (in CI that is a failure).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest
from unavailable import unavailable

from acp_server.agent.tools.builtin import BUILTIN_TOOLS

JS_TESTS = Path(__file__).parent / "js"
PRESENT_JS = Path(__file__).parent.parent / "acp_server" / "web" / "present.js"

TOOL_CALLS: list[tuple[str, Any]] = [
    ("read_file", {"path": "src/a.py", "line": 3}),
    ("write_file", {"path": "hello.txt", "content": "Hello"}),
    ("edit_file", {"path": "b.py", "oldText": "a", "newText": "b"}),
    ("list_directory", {"path": "."}),
    ("glob", {"pattern": "**/*.py"}),
    ("grep", {"pattern": "TODO", "path": "src"}),
    ("run_command", {"command": "pytest", "args": ["-q", "tests"]}),
    ("todo_write", {"todos": []}),
    ("task", {"prompt": "Find the tests " + "and read them " * 10}),
    ("search_history", {"pattern": "greeting"}),
    ("read_file", {"line": 3}),
    ("run_command", "not an object"),
    ("unknown_tool", {}),
]
"""Calls of every built-in tool, with and without the arguments their titles need."""


@pytest.mark.parametrize(
    ("name", "export"),
    [
        ("client.js", 'export * from "./journal.js"'),
        ("decode.js", "export function decodeRecords"),
        ("journal.js", "export class Journal"),
        ("connection.js", "export class AcpConnection"),
        ("follow.js", "export class Follow"),
        ("fold.js", "export class ConversationFold"),
        ("present.js", "export function presentTool"),
        ("commands.js", "export function completions"),
        ("dom.js", "export function el"),
        ("render.js", "export function renderNode"),
        ("controls.js", "export class SessionControls"),
        ("search.js", "export class SessionSearch"),
        ("sessions.js", "export class SessionList"),
        ("format.js", "export function contextText"),
        ("traffic.js", "export class CountingSocket"),
    ],
)
def test_the_package_ships_the_browser_module(name: str, export: str) -> None:
    module = files("acp_server").joinpath(f"web/{name}")
    assert module.is_file()
    assert export in module.read_text(encoding="utf-8")


@pytest.mark.process
def test_the_browser_modules_pass_their_node_tests() -> None:
    node = shutil.which("node")
    if node is None:
        unavailable("Node.js is not on PATH: the browser modules' tests need it (CI has it)")
    tests = sorted(str(path) for path in JS_TESTS.glob("*.test.mjs"))
    assert tests, f"no Node tests in {JS_TESTS}"
    run = subprocess.run(
        [node, "--test", *tests], capture_output=True, text=True, timeout=600, check=False
    )
    report = run.stdout + run.stderr
    assert run.returncode == 0, f"node --test failed:\n{report}"
    passed = re.search(r"^# pass (\d+)$", report, re.MULTILINE)
    assert passed is not None and int(passed.group(1)) > 0, report
    assert re.search(r"^# fail 0$", report, re.MULTILINE), report


@pytest.mark.process
def test_the_viewer_titles_and_kinds_tool_calls_as_the_server_does() -> None:
    node = shutil.which("node")
    if node is None:
        unavailable("Node.js is not on PATH: the browser modules' tests need it (CI has it)")
    script = (
        f"const {{ presentTool }} = await import({json.dumps(PRESENT_JS.as_uri())});"
        f"const calls = {json.dumps(TOOL_CALLS)};"
        "console.log(JSON.stringify(calls.map(([name, input]) => presentTool(name, input))));"
    )
    run = subprocess.run(
        [node, "--input-type=module", "-e", script],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    shown = [(p["title"], p["kind"]) for p in json.loads(run.stdout)]
    expected = [
        (presented.title, presented.kind)
        for presented in (BUILTIN_TOOLS.present(name, args) for name, args in TOOL_CALLS)
    ]
    assert shown == expected
