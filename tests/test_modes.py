"""Modes and config options (SPEC 4.4): the permission table, the settings a log holds, and
their ACP shapes, checked against the official models of the `agent-client-protocol` package."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from acp import schema
from acp_models import exact

from acp_server.core.events import (
    SessionConfig,
    SessionConfigData,
    SessionEvent,
    SessionMode,
    SessionModeData,
    SessionTitle,
    SessionTitleData,
)
from acp_server.core.modes import (
    MODE_IDS,
    REASONING_LEVELS,
    Choices,
    SettingError,
    Settings,
    check_setting,
    config_options,
    default_settings,
    fold_settings,
    mode_state,
    permission_decision,
)

CHOICES = Choices(("gpt-4o", "gpt-4o-mini"), REASONING_LEVELS)
DEFAULTS = Settings("default", "gpt-4o", "medium")


def as_json(value: Any) -> Any:
    return msgspec.json.decode(msgspec.json.encode(value))


@pytest.mark.parametrize(
    ("mode", "kind", "decision"),
    [
        ("default", "edit", "ask"),
        ("default", "execute", "ask"),
        ("default", "other", "ask"),
        ("accept-edits", "edit", "allow"),
        ("accept-edits", "execute", "ask"),
        ("accept-edits", "other", "ask"),
        ("plan", "edit", "refuse"),
        ("plan", "execute", "refuse"),
        ("plan", "other", "refuse"),
        ("full-access", "edit", "allow"),
        ("full-access", "execute", "allow"),
        ("full-access", "other", "allow"),
    ],
)
def test_permission_decision_follows_the_mode_table(mode: str, kind: str, decision: str) -> None:
    assert permission_decision(mode, kind) == decision


def test_the_modes_are_the_four_of_the_spec_in_order() -> None:
    assert MODE_IDS == ("default", "accept-edits", "plan", "full-access")


def test_default_settings_take_the_first_model_and_medium_effort() -> None:
    assert default_settings("plan", CHOICES) == Settings("plan", "gpt-4o", "medium")


def test_default_settings_have_no_effort_when_the_provider_takes_none() -> None:
    assert default_settings("default", Choices(("llm-replay",))) == Settings(
        "default", "llm-replay", None
    )


def event(kind: Any, data: Any, seq: int = 0) -> SessionEvent:
    return kind(seq, 0, data)  # type: ignore[no-any-return]


def test_fold_settings_takes_the_latest_mode_and_config_events() -> None:
    events = [
        event(SessionMode, SessionModeData("plan")),
        event(SessionConfig, SessionConfigData("model", "gpt-4o-mini"), 1),
        event(SessionTitle, SessionTitleData("t"), 2),
        event(SessionMode, SessionModeData("full-access"), 3),
        event(SessionConfig, SessionConfigData("reasoning", "high"), 4),
    ]
    assert fold_settings(events, DEFAULTS, CHOICES) == Settings(
        "full-access", "gpt-4o-mini", "high"
    )


def test_fold_settings_takes_a_mode_set_as_a_config_option() -> None:
    events = [event(SessionConfig, SessionConfigData("mode", "accept-edits"))]
    assert fold_settings(events, DEFAULTS, CHOICES).mode == "accept-edits"


def test_fold_settings_falls_back_to_the_default_for_a_value_no_longer_offered() -> None:
    events = [
        event(SessionMode, SessionModeData("yolo")),
        event(SessionConfig, SessionConfigData("model", "gone-model"), 1),
    ]
    assert fold_settings(events, DEFAULTS, CHOICES) == DEFAULTS


def test_check_setting_accepts_an_offered_value() -> None:
    assert check_setting("model", "gpt-4o-mini", CHOICES) == "gpt-4o-mini"


def test_check_setting_names_an_unknown_config_id() -> None:
    with pytest.raises(SettingError) as caught:
        check_setting("temperature", "1", CHOICES)
    assert caught.value.field == "configId"
    assert str(caught.value) == (
        "unknown config option 'temperature'; offered: mode, model, reasoning"
    )


def test_check_setting_names_the_values_of_the_option() -> None:
    with pytest.raises(SettingError) as caught:
        check_setting("mode", "yolo", CHOICES)
    assert caught.value.field == "value"
    assert str(caught.value) == (
        "'yolo' is not a value of 'mode'; one of: default, accept-edits, plan, full-access"
    )


def test_check_setting_refuses_reasoning_when_the_provider_takes_none() -> None:
    with pytest.raises(SettingError):
        check_setting("reasoning", "high", Choices(("llm-replay",)))


def test_check_setting_refuses_a_boolean_for_a_select() -> None:
    with pytest.raises(SettingError):
        check_setting("mode", True, CHOICES)


def test_mode_state_fits_the_acp_model() -> None:
    value = as_json(mode_state("plan"))
    exact(schema.SessionModeState, value, "modes")
    assert value["currentModeId"] == "plan"
    assert [m["id"] for m in value["availableModes"]] == list(MODE_IDS)


def test_config_options_fit_the_acp_model_with_their_current_values() -> None:
    options = as_json(config_options(Settings("plan", "gpt-4o-mini", "high"), CHOICES))
    for option in options:
        exact(schema.SessionConfigOptionSelect, option, option["id"])
    assert [(o["id"], o["category"], o["currentValue"]) for o in options] == [
        ("mode", "mode", "plan"),
        ("model", "model", "gpt-4o-mini"),
        ("reasoning", "thought_level", "high"),
    ]
    assert [o["value"] for o in options[1]["options"]] == ["gpt-4o", "gpt-4o-mini"]


def test_config_options_leave_reasoning_out_when_the_provider_takes_none() -> None:
    options = config_options(Settings("default", "llm-replay"), Choices(("llm-replay",)))
    assert [o.id for o in options] == ["mode", "model"]
