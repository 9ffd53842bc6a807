"""The server's own system prompt through the real server, against loopback OpenAI-compatible
and Anthropic endpoints: the exact system message (the fixed text, the session's directories,
platform, shell, date, mode and tools, the project's `AGENTS.md` files, the nearest last),
`--system-prompt-file`, the `session/context` event that keeps the prompt's inputs, the 32 KiB
cap and its notice, and `/init`.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from acp_process import AcpProcess
from anthropic_server import FakeAnthropic, reply, text_block
from openai_server import FakeOpenAI, Sse, call, chunk, text

from acp_server.agent.prompts import builtin_prompt
from acp_server.agent.tools import BUILTIN_TOOLS
from acp_server.core.commands import init_request
from acp_server.core.prompt_render import tool_purpose
from acp_server.storage.jsonl.log import read_log

pytestmark = pytest.mark.process

HI = Sse([chunk(text("Hi.")), chunk(finish="stop")])
TOOLS = "\n".join(f"- {t.name}: {tool_purpose(t.description)}" for t in BUILTIN_TOOLS.definitions)


class Project:
    """A repository two levels above the working directory, the user's own AGENTS.md in the
    config directory, and an AGENTS.md above the repository that is never read."""

    def __init__(self, tmp_path: Path) -> None:
        self.config = tmp_path / "config"
        self.config.mkdir()
        (self.config / "AGENTS.md").write_text("User: answer briefly.\n")
        (tmp_path / "AGENTS.md").write_text("Outside the repository: never read.\n")
        self.root = tmp_path / "repo"
        self.cwd = self.root / "pkg" / "app"
        self.cwd.mkdir(parents=True)
        (self.root / ".git").mkdir()
        (self.root / "AGENTS.md").write_text("Root: indent with tabs.\n")
        (self.root / "pkg" / "CLAUDE.md").write_text("Package: run make test.\n")
        (self.cwd / "AGENTS.md").write_text("App: indent with spaces.\n")
        (self.cwd / "CLAUDE.md").write_text("App's CLAUDE.md: never read beside AGENTS.md.\n")
        self.extra = tmp_path / "shared"
        self.extra.mkdir()

    def env(self) -> dict[str, str]:
        return {**os.environ, "ACP_SERVER_CONFIG_DIR": str(self.config), "SHELL": "/bin/zsh"}

    def new_session(self, server: AcpProcess, **params: Any) -> str:
        server.initialize()
        session: str = server.result(
            "session/new",
            {
                "cwd": str(self.cwd),
                "additionalDirectories": [str(self.extra)],
                "mcpServers": [],
                **params,
            },
        )["sessionId"]
        return session

    def expected(self, base: str, date: str, mode: str = "default") -> str:
        """The whole system message of a session of this project, on `date`."""
        rules = {
            "default": "writes, edits and commands ask the user for permission first. A call "
            "the user rejects comes back as an error: do not repeat it unchanged; ask or take "
            "another way.",
            "plan": "writes, edits and commands are refused. Read and search to understand "
            "the task, then present a plan; the user switches modes to carry it out.",
        }
        return (
            f"{base.strip()}\n\n"
            "# Environment\n\n"
            f"- Working directory: {self.cwd}\n"
            f"- Additional directories: {self.extra}\n"
            f"- Platform: {platform.system()}\n"
            "- Shell: zsh\n"
            f"- Date: {date}\n\n"
            "# Mode\n\n"
            f"The session is in {mode} mode: {rules[mode]}\n\n"
            f"# Tools\n\n{TOOLS}\n\n"
            "# Project instructions\n\n"
            "The project's instruction files follow, the farthest from the working directory "
            "first. Follow them; where two disagree, the later one (nearer the working "
            "directory) takes precedence. The user's own requests take precedence over all "
            "of them.\n\n"
            f"## {self.config / 'AGENTS.md'}\n\nUser: answer briefly.\n\n"
            f"## {self.root / 'AGENTS.md'}\n\nRoot: indent with tabs.\n\n"
            f"## {self.root / 'pkg' / 'CLAUDE.md'}\n\nPackage: run make test.\n\n"
            f"## {self.cwd / 'AGENTS.md'}\n\nApp: indent with spaces.\n"
        )


def say(server: AcpProcess, session_id: str, words: str = "hi", **answer: Any) -> Any:
    response, before = server.exchange(
        "session/prompt",
        {"sessionId": session_id, "prompt": [{"type": "text", "text": words}]},
        **answer,
    )
    assert response["result"] == {"stopReason": "end_turn"}, response
    return before


def events(sessions: Path, session_id: str, kind: str) -> list[dict[str, Any]]:
    """(seq, data) of the session's events of type `kind`."""
    values = [
        msgspec.to_builtins(e) for e in read_log(sessions / session_id / "session.jsonl").events
    ]
    return [{"seq": v["seq"], **v["data"]} for v in values if v["type"] == kind]


def logged_date(sessions: Path, session_id: str) -> str:
    """The date the session's prompt gave, as its log keeps it."""
    date: str = events(sessions, session_id, "session/context")[-1]["settings"]["date"]
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", date)
    return date


def openai_server(sessions: Path, model: FakeOpenAI, project: Project, *flags: str) -> AcpProcess:
    # No title call: each of the model's answers is for a turn.
    base = ("--provider", "openai", "--model", "gpt-4o", "--titles", "off")
    base += ("--base-url", model.base_url)
    return AcpProcess(sessions, *base, *flags, env=project.env())


def test_the_openai_system_message_is_the_fixed_text_and_the_sessions_context_nearest_last(
    tmp_path: Path,
) -> None:
    project, sessions = Project(tmp_path), tmp_path / "sessions"
    with FakeOpenAI([HI, HI]) as model, openai_server(sessions, model, project) as server:
        session_id = project.new_session(server)
        say(server, session_id)
        server.result("session/set_mode", {"sessionId": session_id, "modeId": "plan"})
        say(server, session_id)
    date = logged_date(sessions, session_id)
    first, second = (r.body["messages"][0] for r in model.requests)
    base = builtin_prompt("openai").text
    assert first == {"role": "system", "content": project.expected(base, date)}
    assert second == {"role": "system", "content": project.expected(base, date, "plan")}


def test_the_anthropic_system_block_is_the_same_text_with_a_cache_breakpoint(
    tmp_path: Path,
) -> None:
    project, sessions = Project(tmp_path), tmp_path / "sessions"
    flags = ("--provider", "anthropic", "--model", "claude-sonnet-4-5", "--titles", "off")
    with (
        FakeAnthropic([Sse(reply(text_block(0, "Hi.")))]) as model,
        AcpProcess(sessions, *flags, "--base-url", model.base_url, env=project.env()) as server,
    ):
        session_id = project.new_session(server)
        say(server, session_id)
    date = logged_date(sessions, session_id)
    assert model.requests[0].body["system"] == [
        {
            "type": "text",
            "text": project.expected(builtin_prompt("anthropic").text, date),
            "cache_control": {"type": "ephemeral"},
        }
    ]


def test_the_log_keeps_the_instruction_files_and_settings_the_prompt_was_made_of(
    tmp_path: Path,
) -> None:
    project, sessions = Project(tmp_path), tmp_path / "sessions"
    with FakeOpenAI([HI, HI]) as model, openai_server(sessions, model, project) as server:
        session_id = project.new_session(server)
        say(server, session_id)
        say(server, session_id)  # nothing changed: nothing more is logged
    import hashlib

    def file(path: Path) -> dict[str, Any]:
        data = path.read_bytes()
        return {"path": str(path), "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}

    base = builtin_prompt("openai")
    assert events(sessions, session_id, "session/context") == [
        {
            "seq": 0,
            "instructions": [
                file(project.config / "AGENTS.md"),
                file(project.root / "AGENTS.md"),
                file(project.root / "pkg" / "CLAUDE.md"),
                file(project.cwd / "AGENTS.md"),
            ],
            "settings": {
                "prompt": "acp-server:default",
                "promptSha256": base.sha256,
                "platform": platform.system(),
                "date": logged_date(sessions, session_id),
                "shell": "zsh",
            },
        }
    ]


def test_an_instruction_file_changed_between_turns_is_read_again_and_logged(
    tmp_path: Path,
) -> None:
    project, sessions = Project(tmp_path), tmp_path / "sessions"
    with FakeOpenAI([HI, HI]) as model, openai_server(sessions, model, project) as server:
        session_id = project.new_session(server)
        say(server, session_id)
        (project.cwd / "AGENTS.md").write_text("App: indent with two spaces.\n")
        say(server, session_id)
    assert model.requests[0].body["messages"][0]["content"].endswith("App: indent with spaces.\n")
    assert (
        model.requests[1].body["messages"][0]["content"].endswith("App: indent with two spaces.\n")
    )
    logged = events(sessions, session_id, "session/context")
    assert [(e["instructions"][-1]["bytes"]) for e in logged] == [25, 29]


def test_instructions_over_32_kib_are_cut_farthest_first_with_a_notice(tmp_path: Path) -> None:
    project, sessions = Project(tmp_path), tmp_path / "sessions"
    (project.root / "AGENTS.md").write_text("x" * (40 * 1024))
    with FakeOpenAI([HI]) as model, openai_server(sessions, model, project) as server:
        server.result(
            "initialize",
            {"protocolVersion": 1, "clientCapabilities": {"session": {"notices": {}}}},
        )
        session_id = server.result("session/new", {"cwd": str(project.cwd), "mcpServers": []})[
            "sessionId"
        ]
        say(server, session_id)
        assert server.finish() == 0
        frames = [json.loads(line) for line in server.stdout_lines]
    sent = model.requests[0].body["messages"][0]["content"]
    kept = 32 * 1024 - len("Package: run make test.\n") - len("App: indent with spaces.\n")
    assert f"## {project.root / 'AGENTS.md'} (cut: only its beginning fits)\n\n" in sent
    assert "x" * kept + "\n\n" in sent and "x" * (kept + 1) not in sent
    assert "User: answer briefly." not in sent  # the farthest: no room left
    description = (
        "The project instructions hold at most 32 KiB in all, the files nearest the working "
        f"directory first: {project.config / 'AGENTS.md'} was left out (22 bytes); "
        f"{project.root / 'AGENTS.md'} was cut to {kept} of its {40 * 1024} bytes."
    )
    assert events(sessions, session_id, "session/notice") == [
        {
            "seq": 1,
            "severity": "warning",
            "title": "Project instructions cut",
            "description": description,
        }
    ]
    notices = [
        f["params"]["update"]
        for f in frames
        if f.get("method") == "session/update"
        and f["params"]["update"]["sessionUpdate"] == "notice"
    ]
    assert notices == [
        {
            "sessionUpdate": "notice",
            "severity": "warning",
            "title": "Project instructions cut",
            "description": description,
        }
    ]


def test_system_prompt_file_replaces_the_fixed_text_and_keeps_the_context(tmp_path: Path) -> None:
    project, sessions = Project(tmp_path), tmp_path / "sessions"
    own = tmp_path / "prompt.md"
    own.write_text("You are a careful reviewer. Never change files.\n")
    with (
        FakeOpenAI([HI]) as model,
        openai_server(sessions, model, project, "--system-prompt-file", str(own)) as server,
    ):
        session_id = project.new_session(server)
        say(server, session_id)
    date = logged_date(sessions, session_id)
    assert model.requests[0].body["messages"][0] == {
        "role": "system",
        "content": project.expected("You are a careful reviewer. Never change files.", date),
    }
    settings = events(sessions, session_id, "session/context")[0]["settings"]
    assert settings["prompt"] == str(own)


def test_a_client_override_replaces_even_the_system_prompt_files_text(tmp_path: Path) -> None:
    project, sessions = Project(tmp_path), tmp_path / "sessions"
    own = tmp_path / "prompt.md"
    own.write_text("You are a careful reviewer.\n")
    override = {"mode": "override", "content": [{"type": "text", "text": "You are a poet."}]}
    with (
        FakeOpenAI([HI]) as model,
        openai_server(sessions, model, project, "--system-prompt-file", str(own)) as server,
    ):
        session_id = project.new_session(server, systemPrompt=override)
        say(server, session_id)
    assert model.requests[0].body["messages"][0] == {"role": "system", "content": "You are a poet."}


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("missing.md", None, "no such file or directory"),
        ("empty.md", b"  \n", "is empty: it must hold the system prompt's text"),
        ("latin1.md", b"caf\xe9\n", "is not UTF-8 text"),
    ],
)
def test_an_unusable_system_prompt_file_stops_the_server_with_status_2(
    tmp_path: Path, name: str, content: bytes | None, reason: str
) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    done = subprocess.run(
        [sys.executable, "-m", "acp_server", "serve", "--system-prompt-file", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    if content is None:
        line = f"acp-server serve: error: --system-prompt-file: {reason}: {path}\n"
    else:
        line = f"acp-server serve: error: --system-prompt-file: {path} {reason}\n"
    assert done.stderr.endswith(line)
    assert "Traceback" not in done.stderr


def test_init_asks_the_model_for_an_agents_md_written_with_the_write_tool_and_its_permission(
    tmp_path: Path,
) -> None:
    project, sessions = Project(tmp_path), tmp_path / "sessions"
    arguments = msgspec.json.encode({"path": "NEW.md", "content": "# Agents\n"}).decode()
    write = Sse(
        [call(0, id="call_w", name="write_file", arguments=arguments), chunk(finish="tool_calls")]
    )
    asked: list[dict[str, Any]] = []

    def allow(frame: dict[str, Any]) -> Any:
        asked.append(frame)
        return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}

    with FakeOpenAI([write, HI]) as model, openai_server(sessions, model, project) as server:
        session_id = project.new_session(server)
        say(server, session_id, "/init focus on the tests", answer=allow)
    assert model.requests[0].body["messages"][1] == {
        "role": "user",
        "content": init_request("focus on the tests"),
    }
    assert [f["method"] for f in asked] == ["session/request_permission"]
    assert (project.cwd / "NEW.md").read_text() == "# Agents\n"


def test_instructions_grown_past_the_cap_between_turns_are_a_notice_before_the_turn(
    tmp_path: Path,
) -> None:
    project, sessions = Project(tmp_path), tmp_path / "sessions"
    with FakeOpenAI([HI, HI]) as model, openai_server(sessions, model, project) as server:
        server.result(
            "initialize",
            {"protocolVersion": 1, "clientCapabilities": {"session": {"notices": {}}}},
        )
        session_id = server.result("session/new", {"cwd": str(project.cwd), "mcpServers": []})[
            "sessionId"
        ]
        assert say(server, session_id) == []
        (project.root / "pkg" / "CLAUDE.md").write_text("y" * (33 * 1024))
        before = say(server, session_id)
    notice = before[0]["params"]["update"]
    assert (notice["sessionUpdate"], notice["title"]) == ("notice", "Project instructions cut")
    types = [e["type"] for e in events_of(sessions, session_id)]
    second_turn = [i for i, t in enumerate(types) if t == "turn/start"][1]
    assert types[second_turn - 3 : second_turn] == [
        "turn/end",
        "session/context",
        "session/notice",
    ]
    assert (
        model.requests[1]
        .body["messages"][0]["content"]
        .endswith(
            "(cut: only its beginning fits)\n\n" + "y" * (32 * 1024 - 25) + "\n\n"
            f"## {project.cwd / 'AGENTS.md'}\n\nApp: indent with spaces.\n"
        )
    )


def test_llm_replay_sends_no_prompt_of_its_own_and_logs_none(tmp_path: Path) -> None:
    project, sessions = Project(tmp_path), tmp_path / "sessions"
    with AcpProcess(sessions, env=project.env()) as server:
        session_id = project.new_session(server)
        assert server.finish() == 0
    assert events_of(sessions, session_id) == []


def events_of(sessions: Path, session_id: str) -> list[dict[str, Any]]:
    return [
        msgspec.to_builtins(e) for e in read_log(sessions / session_id / "session.jsonl").events
    ]
