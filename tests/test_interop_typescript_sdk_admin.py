"""The official TypeScript SDK 2.4.0 (`@agentclientprotocol/sdk`, its app API `client()`) driving
the protocol's unstable session methods against the real server: `session/fork` (at the default
point and at a message), `session/set_title`, `session/status`, `session/archive`,
`session/unarchive` and `session/list` with each archive filter. Only 2.4.0: the 1.x client has
none of these methods.

`tests/interop/ts/admin.mjs` runs the whole flow once per module (one server process) and prints
a JSON summary; each test below checks one behaviour of it. Each answer is held to the SDK's own
zod model inside the script (`violations`), and every frame the server wrote to the SDK's v1
unstable JSON schema here (`sdk_schema.check`). The logs are read back from the store.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from fixtures_builder import Scenario, Step, write_fixture
from node_packages import CURRENT_SDK, PACKAGES, locked_version, node_with_packages
from sdk_schema import check

from acp_server.core.events import AssistantMessageEvent, SessionEvent, TurnEnd
from acp_server.storage.url import open_store, parse_store_url

pytestmark = pytest.mark.process

TWO_TURNS = Scenario([("First?", [Step(text="One.")]), ("Second?", [Step(text="Two.")])])

RESULT_DEFINITIONS = {
    "initialize": "InitializeResponse",
    "session/new": "NewSessionResponse",
    "session/prompt": "PromptResponse",
    "session/fork": "ForkSessionResponse",
    "session/set_title": "SetSessionTitleResponse",
    "session/status": "SessionStatusResponse",
    "session/archive": "ArchiveSessionResponse",
    "session/unarchive": "UnarchiveSessionResponse",
    "session/list": "ListSessionsResponse",
}
"""The schema's definition of the answer to each method the script sends."""


@dataclass(frozen=True)
class Run:
    summary: dict[str, Any]
    out: Path
    sessions: Path

    @property
    def parent(self) -> str:
        return str(self.summary["sessionId"])

    def fork(self, which: str) -> str:
        return str(self.summary[which]["sessionId"])

    def names(self) -> dict[str, str]:
        return {
            self.parent: "parent",
            self.fork("forkedDefault"): "forked-default",
            self.fork("forkedAt"): "forked-at",
        }

    def listed(self, which: str) -> list[tuple[str, bool, str | None]]:
        """(name, archived, title) of each session a `session/list` gave, sorted."""
        names = self.names()
        return sorted((names[s], archived, title) for s, archived, title in self.summary[which])

    def log(self, session_id: str) -> list[SessionEvent]:
        async def read() -> list[SessionEvent]:
            store = open_store(parse_store_url(str(self.sessions)))
            try:
                return (await store.read(session_id)).events
            finally:
                await store.aclose()

        return anyio.run(read)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    node = node_with_packages("the TypeScript SDK interop test")
    root = tmp_path_factory.mktemp("admin")
    fixture = write_fixture(root / "fixture", TWO_TURNS)
    (root / "workspace").mkdir()
    (root / "out").mkdir()
    config = {
        "python": sys.executable,
        "sessionsDir": str(root / "sessions"),
        "fixture": str(fixture),
        "workspace": str(root / "workspace"),
        "out": str(root / "out"),
    }
    script = subprocess.run(
        [node, "admin.mjs", json.dumps(config)],
        check=False,
        cwd=PACKAGES,
        capture_output=True,
        text=True,
        timeout=60,
    )
    server_log = (root / "out" / "admin.stderr.log").read_text()
    assert script.returncode == 0, f"admin.mjs failed:\n{script.stderr}\nserver: {server_log}"
    assert "Traceback" not in server_log, server_log
    return Run(json.loads(script.stdout), root / "out", root / "sessions")


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_script_ran_sdk_2_4_0_and_the_server_exited_cleanly(run: Run) -> None:
    assert (run.summary["sdkVersion"], run.summary["exitCode"]) == (
        locked_version(CURRENT_SDK),
        0,
    )
    assert run.summary["stopReasons"] == ["end_turn", "end_turn"]


def test_every_answer_fits_the_sdk_s_zod_models(run: Run) -> None:
    assert run.summary["violations"] == [], "\n".join(run.summary["violations"])


def test_every_frame_the_server_wrote_fits_the_sdk_s_unstable_schema(run: Run) -> None:
    frames = _jsonl(run.out / "admin.stdout.jsonl")
    sent = _jsonl(run.out / "admin.stdin.jsonl")
    methods_by_id = {m["id"]: m["method"] for m in sent if "method" in m and "id" in m}
    for frame in frames:
        assert frame["jsonrpc"] == "2.0" and "error" not in frame, frame
        if "method" in frame:
            assert frame["method"] == "session/update", frame
            check("SessionNotification", frame["params"])
        else:
            check(RESULT_DEFINITIONS[methods_by_id[frame["id"]]], frame["result"])
    answered = sorted(f["id"] for f in frames if "method" not in f)
    assert answered == sorted(methods_by_id)
    assert sorted(set(methods_by_id.values())) == sorted(RESULT_DEFINITIONS)


def test_initialize_advertises_fork_title_status_and_archive(run: Run) -> None:
    capabilities = run.summary["sessionCapabilities"]
    assert [capabilities[name] for name in ("fork", "title", "status", "archive")] == [{}] * 4


def test_a_default_fork_holds_the_parent_through_its_last_completed_turn(run: Run) -> None:
    parent_log = run.log(run.parent)
    last_turn_end = max(e.seq for e in parent_log if type(e) is TurnEnd)
    through = run.summary["forkedDefault"]["_meta"]
    assert through == {"acp-server": {"throughSeq": last_turn_end}}
    fork_log = run.log(run.fork("forkedDefault"))
    assert fork_log[: last_turn_end + 1] == parent_log[: last_turn_end + 1]
    assert msgspec.to_builtins(fork_log[last_turn_end + 1])["data"] == {
        "fromSessionId": run.parent,
        "throughSeq": last_turn_end,
    }


def test_a_fork_at_a_message_id_holds_the_parent_through_that_message(run: Run) -> None:
    parent_log = run.log(run.parent)
    first_answer = next(e.seq for e in parent_log if type(e) is AssistantMessageEvent)
    assert run.summary["forkedAt"]["_meta"] == {"acp-server": {"throughSeq": first_answer}}
    fork_log = run.log(run.fork("forkedAt"))
    assert fork_log[: first_answer + 1] == parent_log[: first_answer + 1]
    tail = [msgspec.to_builtins(e) for e in fork_log[first_answer + 1 :]]
    assert [(e["type"], e["data"]) for e in tail] == [
        ("session/forked", {"fromSessionId": run.parent, "throughSeq": first_answer}),
        ("step/end", {"turn": 0, "step": 0}),
        ("turn/end", {"turn": 0, "reason": {"kind": "interrupted"}}),
        ("session/archived", {"archived": True}),
        ("session/archived", {"archived": False}),
    ]


def test_set_title_answers_the_title_and_shows_it_to_the_client(run: Run) -> None:
    assert run.summary["titled"] == {"title": "The parent"}
    # The first is the automatic title its first turn gave it (the first prompt's line).
    assert run.summary["titleUpdates"] == [
        [run.parent, {"sessionUpdate": "session_info_update", "title": "First?"}],
        [run.parent, {"sessionUpdate": "session_info_update", "title": "The parent"}],
    ]
    last = msgspec.to_builtins(run.log(run.parent)[-1])
    assert (last["type"], last["data"]) == ("session/title", {"title": "The parent"})


def test_status_is_open_for_a_live_session_and_saved_once_archived(run: Run) -> None:
    assert (run.summary["statusOpen"], run.summary["statusArchived"]) == (
        {"status": "open", "_meta": {"acp-server": {"running": False}}},
        {"status": "saved", "_meta": {"acp-server": {"running": False}}},
    )


def test_an_archived_session_is_listed_only_when_asked_for_until_unarchived(run: Run) -> None:
    assert (run.summary["archived"], run.summary["unarchived"]) == ({}, {})
    # The default fork copied the parent's automatic title; the fork at the first message did
    # not (it ends before that turn did).
    assert run.listed("listDefault") == [
        ("forked-default", False, "First?"),
        ("parent", False, "The parent"),
    ]
    assert run.listed("listInclude") == [
        ("forked-at", True, None),
        ("forked-default", False, "First?"),
        ("parent", False, "The parent"),
    ]
    assert run.listed("listOnly") == [("forked-at", True, None)]
    assert run.listed("listAfter") == [
        ("forked-at", False, None),
        ("forked-default", False, "First?"),
        ("parent", False, "The parent"),
    ]
