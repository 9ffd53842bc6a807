"""The browser's modules (`acp_server/web/client.js`, the client, re-exporting `decode.js`,
`journal.js`, `connection.js` and `follow.js`; `acp_server/web/fold.js`, the conversation fold):
shipped in the package, and their Node.js tests (`tests/js/*.test.mjs`, Node's own test runner,
no npm packages) pass, on the vectors the Python tests share.

Without `node` on PATH the Node tests are skipped, saying so (in CI that is a failure).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from importlib.resources import files
from pathlib import Path

import pytest
from unavailable import unavailable

JS_TESTS = Path(__file__).parent / "js"


@pytest.mark.parametrize(
    ("name", "export"),
    [
        ("client.js", 'export * from "./journal.js"'),
        ("decode.js", "export function decodeRecords"),
        ("journal.js", "export class Journal"),
        ("connection.js", "export class AcpConnection"),
        ("follow.js", "export class Follow"),
        ("fold.js", "export class ConversationFold"),
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
