"""Static checks of a scenario directory: no run needed (SPEC 5, 6).

`check_scenario(directory)` lists every problem found:

- a required file is missing (`input.json`, `session.jsonl`, `stdout.expected.jsonl`), or a
  file is there that no scenario uses (anything but those, `replay.override.json`,
  `session.N.jsonl` and `workspace/`);
- `input.json` does not fit its schema or its steps are out of order;
- a fixture does not parse, is not in the canonical packed projected layout (rendering it again
  must give the same bytes), or is not normalized (placeholders, every time 0);
- the subagent fixtures do not match the `subagent/start` events of `session.jsonl` one to one
  (a `session.2.jsonl` without a second subagent is an orphan; a subagent without its fixture,
  a missing file);
- a script would not be used up exactly: its model calls (with the override applied) must be
  the calls the log made (its `step/start` events), so no entry is left over;
- the override changes nothing (each patch must replace a different entry);
- `stdout.expected.jsonl` has a line that is not a JSON object.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

from ..core.events import SubagentStart
from ..core.replay_script import (
    CHILD_FIXTURE_NAME,
    FIXTURE_NAME,
    OVERRIDE_NAME,
    ChunksEntry,
    Fixture,
    Override,
    PatchSet,
    ReplayError,
    apply_override,
    count_model_calls,
    derive_script,
    parse_fixture,
    parse_override,
    render_fixture,
)
from .runner import TRANSCRIPT_NAME, WORKSPACE_NAME
from .scenario import INPUT_NAME, ScenarioError, load_input

REQUIRED: Final = (INPUT_NAME, FIXTURE_NAME, TRANSCRIPT_NAME)


def check_scenario(directory: Path) -> list[str]:
    problems: list[str] = []
    names = {p.name: p for p in directory.iterdir()}
    for name in REQUIRED:
        if name not in names:
            problems.append(f"{name}: missing")
    children: dict[int, Path] = {}
    for name, path in sorted(names.items()):
        if name in (*REQUIRED, OVERRIDE_NAME) and path.is_file():
            continue
        if name == WORKSPACE_NAME and path.is_dir():
            continue
        match = CHILD_FIXTURE_NAME.fullmatch(name)
        if match is not None and path.is_file():
            children[int(match.group(1))] = path
            continue
        problems.append(f"{name}: not a scenario file (orphaned)")
    if INPUT_NAME in names:
        try:
            load_input(names[INPUT_NAME])
        except ScenarioError as exc:
            problems.append(str(exc))
    if TRANSCRIPT_NAME in names:
        problems.extend(_check_transcript(names[TRANSCRIPT_NAME]))
    if FIXTURE_NAME not in names:
        return problems
    primary = _fixture(names[FIXTURE_NAME], "<session-1>", problems)
    if primary is None:
        return problems
    override: Override | None = None
    if OVERRIDE_NAME in names:
        try:
            override = parse_override(OVERRIDE_NAME, names[OVERRIDE_NAME].read_bytes())
        except ReplayError as exc:
            problems.append(str(exc))
    problems.extend(_check_script(FIXTURE_NAME, primary, override, OVERRIDE_NAME in names))
    started = [e.data.child_session_id for e in primary.events if type(e) is SubagentStart]
    for number in range(1, max([len(started), *children]) + 1):
        name = f"session.{number}.jsonl"
        if number > len(started):
            problems.append(
                f"{name}: orphaned: {FIXTURE_NAME} starts only {len(started)} subagent(s)"
            )
            continue
        if number not in children:
            problems.append(
                f"{name}: missing: subagent {number} ({started[number - 1]}) has no fixture"
            )
            continue
        child = _fixture(children[number], started[number - 1], problems)
        if child is None:
            continue
        if child.header.origin != "subagent" or child.header.parent_session != primary.header.id:
            problems.append(
                f'{name}: the header must say origin "subagent" and parentSession {primary.header.id!r}'
            )
        problems.extend(_check_script(name, child, None, False))
    return problems


def _fixture(path: Path, expected_id: str, problems: list[str]) -> Fixture | None:
    data = path.read_bytes()
    try:
        fixture = parse_fixture(path.name, data.splitlines())
    except ReplayError as exc:
        problems.append(str(exc))
        return None
    if fixture.events and not fixture.projected:
        problems.append(f"{path.name}: not in projected form (records carry seq/time)")
    if render_fixture(fixture.header, fixture.events) != data:
        problems.append(
            f"{path.name}: not in the canonical packed layout (render_fixture gives other bytes; "
            "refresh the scenario with ACP_SNAPSHOT=refresh)"
        )
    header = fixture.header
    if header.id != expected_id or header.cwd != "<workspace>" or header.created_at != 0:
        problems.append(
            f"{path.name}: the header is not normalized: expected id {expected_id!r}, cwd '<workspace>' "
            f"and createdAt 0, found {header.id!r}, {header.cwd!r}, {header.created_at}"
        )
    timed = [e.seq for e in fixture.events if e.time != 0]
    if timed:
        problems.append(
            f"{path.name}: times are not normalized to 0 (seq {timed[0]} and {len(timed) - 1} more)"
        )
    return fixture


def _check_script(
    name: str, fixture: Fixture, override: Override | None, has_override: bool
) -> list[str]:
    derived = derive_script(fixture.events)
    try:
        script = apply_override(name, derived, override)
    except ReplayError as exc:
        return [str(exc)]
    problems = []
    calls = count_model_calls(fixture.events)
    if len(script) != calls:
        problems.append(
            f"{name}: the script holds {len(script)} model calls but the log made {calls}: "
            + (
                "entries are left unused"
                if len(script) > calls
                else "the log made calls the script does not hold"
            )
        )
    if has_override and override is not None:
        if isinstance(override, PatchSet):
            for patch in override.patches:
                same = (
                    patch.at < len(derived)
                    and isinstance(derived[patch.at], ChunksEntry)
                    and derived[patch.at] == patch.entry
                )
                if same:
                    problems.append(
                        f"{OVERRIDE_NAME}: the patch at {patch.at} changes nothing (unused)"
                    )
        elif list(override) == derived:
            problems.append(
                f"{OVERRIDE_NAME}: replaces the script with the one derived from the fixture (unused)"
            )
    return problems


def _check_transcript(path: Path) -> list[str]:
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            value = json.loads(line)
        except ValueError:
            return [f"{path.name}: line {number} is not JSON"]
        if not isinstance(value, dict):
            return [f"{path.name}: line {number} is not a JSON object"]
    return []


__all__ = ["check_scenario"]
