"""The browser's conversation fold (acp_server/web/fold.js) on the shared vectors, through
Node's test runner: `node --test tests/js/fold.test.mjs` (no npm packages). Without Node.js on
PATH the test is skipped, saying so (in CI it fails: `tests/unavailable.py`)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from unavailable import unavailable

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "tests" / "js" / "fold.test.mjs"


def test_the_javascript_fold_gives_the_vectors_changes_and_nodes() -> None:
    node = shutil.which("node")
    if node is None:
        unavailable("Node.js is not on PATH: the JavaScript fold's tests need it (CI has it)")
    done = subprocess.run(
        [node, "--test", str(SUITE)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    passed = re.search(r"^# pass (\d+)$", report, re.MULTILINE)
    assert passed is not None and int(passed.group(1)) > 0, report
    assert re.search(r"^# fail 0$", report, re.MULTILINE), report
