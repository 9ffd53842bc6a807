"""Provider keys stay out of what the tools reach (SPEC 4.4: a key never appears in a log or on
the wire): the programs `run_command` starts inherit no provider's key variable, and the file
tools refuse the directory the stored credentials live in, even when a session's directories
hold it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from fixtures_builder import ToolUse, args
from local_tools import call_locally as call
from prompt_harness import PromptServer, one_tool_turn

from acp_server.agent.tools import ToolOutcome
from acp_server.core.content import TextContent
from acp_server.providers.credentials import CONFIG_DIR_ENV, KeyName, store_key
from acp_server.providers.registry import LIVE_PROVIDERS
from acp_server.providers.secret import Secret

KEY = "sk-9f3Qz7LmXw2Vb8Np4Rt6Yh1Kd5Gs0JcUe"


@pytest.mark.anyio
@pytest.mark.process
async def test_a_command_inherits_no_providers_key_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = sorted(p.api_key_env for p in LIVE_PROVIDERS.values())
    for name in names:
        monkeypatch.setenv(name, KEY)
    monkeypatch.setenv("ACP_TEST_KEPT", "kept")
    code = f"import os; print([os.environ.get(n) for n in {names!r}], os.environ['ACP_TEST_KEPT'])"
    outcome = await call(tmp_path, "run_command", {"command": sys.executable, "args": ["-c", code]})
    assert names == ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"]
    assert outcome.content == [TextContent("[None, None] kept\n[exit code 0]")]


@pytest.fixture
def stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A session cwd that holds the config directory, with a key stored in it by `login`."""
    work = tmp_path.resolve() / "work"
    config = work / ".config" / "acp-server"
    monkeypatch.setenv(CONFIG_DIR_ENV, str(config))
    store_key(Secret(KEY), KeyName("openai"))
    (work / "notes.txt").write_text(f"the key is not {KEY[:8]} here\n")
    return work


@pytest.mark.anyio
async def test_read_file_refuses_the_stored_credentials_inside_the_cwd(stored: Path) -> None:
    outcome = await call(stored, "read_file", {"path": ".config/acp-server/credentials.json"})
    assert outcome == ToolOutcome(
        [
            TextContent(
                "refused: .config/acp-server/credentials.json (resolved to "
                f"{stored}/.config/acp-server/credentials.json) is in the directory of the "
                f"stored credentials ({stored}/.config/acp-server), which no tool reads"
            )
        ],
        True,
    )


@pytest.mark.anyio
async def test_read_file_refuses_a_symlink_to_the_stored_credentials(stored: Path) -> None:
    (stored / "link.json").symlink_to(stored / ".config" / "acp-server" / "credentials.json")
    outcome = await call(stored, "read_file", {"path": "link.json"})
    assert outcome == ToolOutcome(
        [
            TextContent(
                f"refused: link.json (resolved to {stored}/.config/acp-server/credentials.json)"
                f" is in the directory of the stored credentials ({stored}/.config/acp-server),"
                " which no tool reads"
            )
        ],
        True,
    )


@pytest.mark.anyio
async def test_grep_over_the_cwd_skips_the_stored_credentials(stored: Path) -> None:
    outcome = await call(stored, "grep", {"pattern": KEY[:8], "path": "."})
    assert outcome.content == [TextContent(f"notes.txt:1:the key is not {KEY[:8]} here")]


@pytest.mark.anyio
async def test_glob_over_the_cwd_skips_the_stored_credentials(stored: Path) -> None:
    outcome = await call(stored, "glob", {"pattern": "**/*.json"})
    assert outcome.content == [TextContent("No files match '**/*.json' in ..")]


@pytest.mark.process
def test_the_server_hands_its_tools_the_stored_credentials_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tmp = tmp_path.resolve()
    config = tmp / "workspace" / ".config" / "acp-server"
    monkeypatch.setenv(CONFIG_DIR_ENV, str(config))  # the server inherits it
    store_key(Secret(KEY), KeyName("openai"))
    read = ToolUse("call_read", "read_file", args(path=".config/acp-server/credentials.json"))
    with PromptServer(tmp, one_tool_turn(read)) as server:
        answered = server.prompt(server.new_session(), "go")
    [failed] = [u for u in answered.updates if u.get("status") == "failed"]
    assert failed["content"] == [
        {
            "type": "content",
            "content": {
                "type": "text",
                "text": "refused: .config/acp-server/credentials.json (resolved to "
                "<cwd>/.config/acp-server/credentials.json) is in the directory of the stored "
                "credentials (<cwd>/.config/acp-server), which no tool reads",
            },
        }
    ]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("list_directory", {"path": ".config/acp-server"}),
        ("write_file", {"path": ".config/acp-server/credentials.json", "content": "{}"}),
        (
            "edit_file",
            {"path": ".config/acp-server/credentials.json", "oldText": "a", "newText": "b"},
        ),
    ],
)
async def test_every_file_tool_refuses_the_stored_credentials_directory(
    stored: Path, name: str, arguments: dict[str, str]
) -> None:
    outcome = await call(stored, name, arguments)
    assert outcome.is_error
    assert outcome.content == [
        TextContent(
            f"refused: {arguments['path']} (resolved to {stored}/{arguments['path']}) is in the "
            f"directory of the stored credentials ({stored}/.config/acp-server), which no tool reads"
        )
    ]
    assert (stored / ".config" / "acp-server" / "credentials.json").read_text() == (
        f'{{"keys": [{{"provider": "openai", "apiKey": "{KEY}"}}]}}'
    )
