"""The numbers a server reads from its environment: the value given, else the default with a
warning."""

from __future__ import annotations

import logging

import pytest

from acp_server.server.tunables import env_int, env_seconds

NAME = "ACP_SERVER_TEST_TUNABLE"


def test_an_unset_integer_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(NAME, raising=False)
    assert env_int(NAME, 200, minimum=1) == 200


def test_an_integer_at_its_minimum_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(NAME, " 0 ")
    assert env_int(NAME, 10, minimum=0) == 0


@pytest.mark.parametrize("raw", ["0", "-3", "2.5", "many", ""])
def test_an_integer_below_its_minimum_or_malformed_is_the_default_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, raw: str
) -> None:
    monkeypatch.setenv(NAME, raw)
    with caplog.at_level(logging.WARNING, logger="acp_server.server.tunables"):
        assert env_int(NAME, 200, minimum=1) == 200
    assert caplog.messages == [f"{NAME}={raw!r} is not an integer of at least 1: using 200"]


def test_seconds_are_taken_with_a_fraction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(NAME, "0.25")
    assert env_seconds(NAME, 5.0) == 0.25


@pytest.mark.parametrize("raw", ["-1", "nan", "inf", "soon"])
def test_seconds_negative_or_not_finite_are_the_default_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, raw: str
) -> None:
    monkeypatch.setenv(NAME, raw)
    with caplog.at_level(logging.WARNING, logger="acp_server.server.tunables"):
        assert env_seconds(NAME, 5.0) == 5.0
    assert caplog.messages == [f"{NAME}={raw!r} is not a non-negative number: using 5"]
