"""Normalization (SPEC 6): what makes two runs of one scenario compare equal.

A run's volatile values are replaced, in wire frames and in logs alike:

- session ids (uuid hex) by `<session-1>`, `<session-2>`, ... and subscription ids by
  `<subscription-1>`, ..., numbered in order of first appearance (the transcript first, then
  the logs), so the top-level session is always `<session-1>`;
- the workspace (the sessions' cwd) by `<workspace>`, the sessions directory by `<sessions>`;
- times: an event's `time`, a chunk row's `time0` and every `dt` gap, a header's `createdAt`
  become 0; `updatedAt` (an ISO string) becomes `<time>`;
- the server's version in `initialize`'s `agentInfo` becomes `<version>`;
- the models of the `model` config option (SPEC 4.4) become `<model>`: they name the provider
  that ran (a live model when recording, llm-replay when replaying), not the conversation.

Everything else (message ids, request ids, seqs, texts) is deterministic and kept, but for
what a live server's own system prompt was made of, which a log leaves out (a recording's is
the recording machine's; llm-replay sends no prompt of its own).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final

import msgspec

from ..core.events import SessionEvent, convert_event
from ..core.header import SessionHeader
from ..core.json_values import map_strings
from ..core.replay_script import render_fixture

_HEX_ID: Final = re.compile(r"[0-9a-f]{32}")
TIME_PLACEHOLDER: Final = "<time>"
VERSION_PLACEHOLDER: Final = "<version>"
MODEL_PLACEHOLDER: Final = "<model>"


class Normalizer:
    """Replaces a run's volatile values; numbering is by first appearance, so normalize the
    transcript before the logs, in order."""

    def __init__(
        self,
        paths: Iterable[tuple[str, str]],
        session_ids: Iterable[str],
        subscription_ids: Iterable[str],
    ) -> None:
        # Longest first, so that a path inside another is replaced as a whole.
        self._paths = sorted(paths, key=lambda pair: len(pair[0]), reverse=True)
        self._kinds = {i: "session" for i in session_ids} | {
            i: "subscription" for i in subscription_ids
        }
        self._names: dict[str, str] = {}
        self._counts: dict[str, int] = {}

    @property
    def names(self) -> dict[str, str]:
        """Each real id seen so far and its placeholder."""
        return dict(self._names)

    def placeholder(self, real_id: str) -> str:
        name = self._names.get(real_id)
        if name is None:
            kind = self._kinds[real_id]
            self._counts[kind] = self._counts.get(kind, 0) + 1
            name = self._names[real_id] = f"<{kind}-{self._counts[kind]}>"
        return name

    def text(self, value: str) -> str:
        for old, new in self._paths:
            if old in value:
                value = value.replace(old, new)

        def replace(match: re.Match[str]) -> str:
            found = match.group(0)
            return self.placeholder(found) if found in self._kinds else found

        return _HEX_ID.sub(replace, value)

    def value(self, value: Any) -> Any:
        """A JSON value (a wire frame, a record) with every volatile value replaced."""
        return map_strings(value, self.text, on_object=_normalize_times)

    def log(self, header: SessionHeader, events: Iterable[SessionEvent]) -> bytes:
        """A log as its committed fixture: normalized, every time 0, canonical packed and
        projected (`render_fixture`)."""
        header_value = self.value(msgspec.to_builtins(header))
        header_value["createdAt"] = 0
        values = _without_server_prompt([msgspec.to_builtins(event) for event in events])
        normalized = []
        for value in values:
            value = self.value(value)
            value["time"] = 0
            normalized.append(convert_event(value))
        return render_fixture(msgspec.convert(header_value, SessionHeader), normalized)


def _without_server_prompt(values: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events (plain values) without what a live server's own system prompt was made of: the
    settings and instruction files of its `session/context` events, an event left with no
    client prompt dropped, the seqs after it counted again. A recording's server sends its own
    prompt; llm-replay, which replays the recording, sends none, and the date, platform and
    files it was made of are the recording machine's."""
    kept = []
    for value in values:
        if value["type"] == "session/context":
            data = value["data"]
            if "settings" in data:
                data.pop("settings")
                data["instructions"] = []
                if "systemPrompt" not in data:
                    continue
        kept.append(value)
    if len(kept) == len(values):
        return kept
    renumbered = {value["seq"]: index for index, value in enumerate(kept, start=values[0]["seq"])}

    def seq(old: int) -> int:
        """The new seq of `old`; a seq that was left out becomes the one after it."""
        return next((renumbered[s] for s in sorted(renumbered) if s >= old), len(renumbered))

    for value in kept:
        value["seq"] = renumbered[value["seq"]]
        if "sourceRange" in value:
            value["sourceRange"] = [seq(s) for s in value["sourceRange"]]
        data = value["data"]
        if value["type"] in ("context/compaction", "session/forked") and data["throughSeq"] >= 0:
            data["throughSeq"] = seq(data["throughSeq"] + 1) - 1
    return kept


def _normalize_times(value: dict[str, Any]) -> None:
    """Time fields of one object, recognized by its shape (so a model's own `time` argument
    inside a tool call is left alone)."""
    if "seq" in value and isinstance(value.get("time"), int) and "type" in value:
        value["time"] = 0  # an event
    if "seq0" in value and isinstance(value.get("time0"), int):
        value["time0"] = 0  # a chunk row
        data = value.get("data")
        if isinstance(data, dict) and isinstance(data.get("dt"), list):
            data["dt"] = [0 for _ in data["dt"]]
    if value.get("type") == "session" and isinstance(value.get("createdAt"), int):
        value["createdAt"] = 0  # a log header
    if isinstance(value.get("updatedAt"), str):
        value["updatedAt"] = TIME_PLACEHOLDER  # session/list
    info = value.get("agentInfo")
    if isinstance(info, dict) and isinstance(info.get("version"), str):
        info["version"] = VERSION_PLACEHOLDER
    if value.get("id") == "model" and value.get("category") == "model" and "currentValue" in value:
        value["currentValue"] = MODEL_PLACEHOLDER
        value["options"] = [{"value": MODEL_PLACEHOLDER, "name": MODEL_PLACEHOLDER}]


__all__ = ["MODEL_PLACEHOLDER", "TIME_PLACEHOLDER", "VERSION_PLACEHOLDER", "Normalizer"]
