"""A test that cannot run here is skipped on a developer's machine, and fails in CI."""

from __future__ import annotations

import pytest
from unavailable import unavailable


def test_a_missing_requirement_skips_the_test_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"^no server here$"):
        unavailable("no server here")


def test_a_missing_requirement_fails_the_test_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"^no server here; CI must run this test$"):
        unavailable("no server here")
