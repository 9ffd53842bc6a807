"""What a test needs that a machine may lack (root, Node.js): on a developer's machine the test
is skipped, saying why; in CI (`CI` set, as `.ci/run` is started) that is a failure, never a
skip, since CI installs and starts everything its tests need."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def unavailable(reason: str) -> NoReturn:
    """Skip the test for `reason`, or fail it in CI."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI must run this test", pytrace=False)
    pytest.skip(reason)
