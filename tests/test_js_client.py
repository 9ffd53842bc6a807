"""The browser client module (`acp_server/web/client.js`): shipped in the package, and its Node.js
tests (`tests/js/*.test.mjs`, Node's own test runner, no npm packages) pass.

Without `node` on PATH the Node tests are skipped, saying so (in CI that is a failure).
"""

from __future__ import annotations

import shutil
import subprocess
from importlib.resources import files
from pathlib import Path

from unavailable import unavailable

JS_TESTS = Path(__file__).parent / "js"


def test_the_package_ships_the_client_module() -> None:
    module = files("acp_server").joinpath("web/client.js")
    assert module.is_file()
    assert "export class Journal" in module.read_text(encoding="utf-8")


def test_the_client_module_passes_its_node_tests() -> None:
    node = shutil.which("node")
    if node is None:
        unavailable("Node.js is not on PATH: the browser client's tests need it (CI has it)")
    tests = sorted(str(path) for path in JS_TESTS.glob("*.test.mjs"))
    assert tests, f"no Node tests in {JS_TESTS}"
    run = subprocess.run(
        [node, "--test", *tests], capture_output=True, text=True, timeout=600, check=False
    )
    assert run.returncode == 0, f"node --test failed:\n{run.stdout}\n{run.stderr}"
