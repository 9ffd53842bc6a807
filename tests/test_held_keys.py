"""Every key within a command's reach is scrubbed from tool results (SPEC 4.4: a key never
appears in a log or on the wire), not only the one of the server's own provider: each key the
stored credentials file holds (every provider, every API root) and each one still set in a
provider key variable of the server's environment.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from msgspec import UNSET

from acp_server.agent.loop import Turn
from acp_server.agent.ports import ClientCapabilities
from acp_server.agent.recorder import SessionRecorder
from acp_server.agent.tools import KeptFromTools, ToolContext
from acp_server.agent.turn_env import TurnEnv
from acp_server.core.content import TextContent
from acp_server.core.event_log import EventLog
from acp_server.core.events import ToolResult
from acp_server.core.header import SessionHeader
from acp_server.core.messages import ToolTurn
from acp_server.core.stream import (
    BlockEnd,
    BlockStart,
    Finish,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
)
from acp_server.providers.base import ModelRequest
from acp_server.providers.credentials import CONFIG_DIR_ENV, KeyName, store_key
from acp_server.providers.held_keys import HeldKeys, held_keys
from acp_server.providers.secret import Secret
from acp_server.server.turns import kept_from_tools
from acp_server.storage.jsonl.store import JsonlStore

OPENAI_KEY = "sk-9f3Qz7LmXw2Vb8Np4Rt6Yh1Kd5Gs0JcUe"
ANTHROPIC_KEY = "sk-ant-Zq8Lw3Xv5Bn7Mk1Pj9Hd2Gf4Sc6Ty0Ru"
GATEWAY_KEY = "gw-Hc4Tn8Rb2Wq6Ym0Kz3Vx7Ls1Pd5Fj9"
VARIABLE = "ACP_TEST_PROVIDER_KEY"


def revealed(keys: HeldKeys) -> list[str]:
    return [secret.reveal() for secret in keys.secrets_now()]


@pytest.fixture
def credentials(tmp_path: Path) -> Path:
    """A credentials file as `login` writes it, with keys of two providers and two API roots."""
    path = tmp_path / "config" / "credentials.json"
    store_key(Secret(OPENAI_KEY), KeyName("openai"), path)
    store_key(Secret(ANTHROPIC_KEY), KeyName("anthropic"), path)
    store_key(Secret(GATEWAY_KEY), KeyName("openai", "https://gateway.example/v1"), path)
    return path


def test_every_stored_key_of_every_provider_and_root_is_held_longest_first(
    credentials: Path,
) -> None:
    keys = HeldKeys(credentials, frozenset())
    assert revealed(keys) == [ANTHROPIC_KEY, OPENAI_KEY, GATEWAY_KEY]


def test_a_key_left_in_a_provider_variable_is_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(VARIABLE, ANTHROPIC_KEY)
    keys = HeldKeys(tmp_path / "none" / "credentials.json", frozenset({VARIABLE}))
    assert revealed(keys) == [ANTHROPIC_KEY]
    monkeypatch.delenv(VARIABLE)
    assert revealed(keys) == []


def test_a_value_shorter_than_eight_characters_is_not_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "credentials.json"
    store_key(Secret("the"), KeyName("openai"), path)
    store_key(Secret("12345678"), KeyName("anthropic"), path)
    monkeypatch.setenv(VARIABLE, "abcdefg")
    assert revealed(HeldKeys(path, frozenset({VARIABLE}))) == ["12345678"]


def test_the_file_is_read_again_once_it_changed(credentials: Path) -> None:
    keys = HeldKeys(credentials, frozenset())
    assert revealed(keys) == [ANTHROPIC_KEY, OPENAI_KEY, GATEWAY_KEY]
    store_key(Secret("sk-new-4Gf8Jk2Lm6Np0Qr"), KeyName("openai"), credentials)
    assert revealed(keys) == [ANTHROPIC_KEY, GATEWAY_KEY, "sk-new-4Gf8Jk2Lm6Np0Qr"]
    credentials.unlink()
    assert revealed(keys) == []


def test_keys_in_a_file_others_may_read_or_of_the_earlier_form_are_still_held(
    tmp_path: Path,
) -> None:
    path = tmp_path / "credentials.json"
    path.write_text(f'{{"apiKey": "{OPENAI_KEY}"}}')
    os.chmod(path, 0o644)
    assert revealed(HeldKeys(path, frozenset())) == [OPENAI_KEY]


def test_a_key_json_escapes_is_held_as_the_file_spells_it_too(tmp_path: Path) -> None:
    path = tmp_path / "credentials.json"
    store_key(Secret("sk-\u00e9t\u00e9-Qw3Rt5Yu7Io9"), KeyName("openai"), path)
    assert revealed(HeldKeys(path, frozenset())) == [
        "sk-\\u00e9t\\u00e9-Qw3Rt5Yu7Io9",
        "sk-\u00e9t\u00e9-Qw3Rt5Yu7Io9",
    ]


def test_a_file_nested_past_what_json_decodes_holds_nothing(tmp_path: Path) -> None:
    path = tmp_path / "credentials.json"
    path.write_text("[" * 60_000 + "]" * 60_000)
    assert revealed(HeldKeys(path, frozenset())) == []


def test_the_keys_of_a_credentials_file_that_is_a_symlink_are_held(
    tmp_path: Path, credentials: Path
) -> None:
    link = tmp_path / "link.json"
    link.symlink_to(credentials)
    assert revealed(HeldKeys(link, frozenset())) == [ANTHROPIC_KEY, OPENAI_KEY, GATEWAY_KEY]


def test_a_credentials_file_that_is_no_regular_file_holds_nothing(tmp_path: Path) -> None:
    path = tmp_path / "credentials.json"
    os.mkfifo(path)
    assert revealed(HeldKeys(path, frozenset())) == []


def test_every_turn_shares_one_cache_per_file(credentials: Path) -> None:
    assert held_keys(credentials, frozenset()) is held_keys(credentials, frozenset())


@pytest.mark.anyio
async def test_the_server_hands_its_tools_every_stored_key_and_every_key_variable_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CONFIG_DIR_ENV, str(tmp_path / "config"))
    store_key(Secret(OPENAI_KEY), KeyName("openai"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    held = kept_from_tools().held
    assert held is not None
    assert [secret.reveal() for secret in await held()] == [ANTHROPIC_KEY, OPENAI_KEY]


class OneCall:
    """An OpenAI provider holding `OPENAI_KEY` whose model calls `tool` once, then stops."""

    name = "openai"

    def __init__(self, tool: str, arguments: dict[str, str]) -> None:
        self.api_key = Secret(OPENAI_KEY)
        self.requests: list[ModelRequest] = []
        self.call = (tool, msgspec.json.encode(arguments).decode())

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        self.requests.append(request)
        if len(self.requests) == 1:
            tool, arguments = self.call
            chunks: list[StreamChunk] = [
                BlockStart(0, "tool-call"),
                ToolCallDelta(0, "call_1", arguments, name=tool),
                BlockEnd(0),
                Finish("tool-calls"),
            ]
        else:
            chunks = [BlockStart(0, "text"), TextDelta(0, "Done."), BlockEnd(0), Finish("stop")]
        for chunk in chunks:
            yield chunk


class Client:
    capabilities = ClientCapabilities()

    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def request(self, method: str, params: object) -> object:
        raise AssertionError(method)

    async def notify(self, method: str, params: object) -> None:
        self.sent.append(msgspec.to_builtins(params))


@pytest.fixture
def work(tmp_path: Path, credentials: Path) -> Path:
    """A session cwd holding a copy of the credentials file, as a command could print it, and
    a file holding the anthropic key."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "copy.json").write_bytes(credentials.read_bytes())
    (work / "leak.txt").write_text(f"key={ANTHROPIC_KEY}\n")
    return work


@pytest.mark.anyio
async def test_another_providers_stored_key_is_scrubbed_from_the_log_the_wire_and_the_model(
    tmp_path: Path, credentials: Path, work: Path
) -> None:
    """The server uses openai; a tool shows the whole credentials file: the anthropic key and
    the gateway's are scrubbed as the openai key always was."""
    store = JsonlStore(tmp_path / "sessions")
    header = SessionHeader(version=2, id="s", created_at=0, cwd=str(work))
    recorder = SessionRecorder(await store.create(header), EventLog())
    client, provider = Client(), OneCall("read_file", {"path": "copy.json"})
    kept = KeptFromTools(
        credentials.parent, frozenset(), HeldKeys(credentials, frozenset()).secrets
    )
    tools = ToolContext("s", work, [], client, {"read_file"}, kept=kept)
    assert await Turn(TurnEnv(recorder, provider, client, tools), [TextContent("go")]).run() == (
        "end_turn"
    )
    await recorder.close()
    shown = (
        '{"keys": [{"provider": "anthropic", "apiKey": "[redacted]"}, '
        '{"provider": "openai", "apiKey": "[redacted]"}, '
        '{"provider": "openai", "baseUrl": "https://gateway.example/v1", "apiKey": "[redacted]"}]}'
    )
    [result] = [e for e in recorder.log.events() if type(e) is ToolResult]
    assert result.data.content == [TextContent(shown)]
    [sent] = [m for m in provider.requests[1].messages if isinstance(m, ToolTurn)]
    assert sent.content == [TextContent(shown)]
    wire = msgspec.json.encode(client.sent).decode()
    log = (tmp_path / "sessions" / "s" / "session.jsonl").read_text()
    for text in (wire, log):
        assert [k for k in (OPENAI_KEY, ANTHROPIC_KEY, GATEWAY_KEY) if k in text] == []
    assert shown.replace('"', '\\"') in wire


@pytest.mark.anyio
async def test_a_file_holding_another_providers_stored_key_is_changed_without_a_checkpoint(
    tmp_path: Path, credentials: Path, work: Path
) -> None:
    """The store, like the log, holds no key: what the file held before is not kept."""
    store = JsonlStore(tmp_path / "sessions")
    header = SessionHeader(version=2, id="s", created_at=0, cwd=str(work))
    recorder = SessionRecorder(await store.create(header), EventLog())
    client = Client()
    provider = OneCall("write_file", {"path": "leak.txt", "content": "no key here\n"})
    kept = KeptFromTools(
        credentials.parent, frozenset(), HeldKeys(credentials, frozenset()).secrets
    )
    kept_blobs: list[bytes] = []

    async def keep(data: bytes) -> str:
        kept_blobs.append(data)
        return "digest"

    tools = ToolContext("s", work, [], client, {"write_file"}, kept=kept)
    env = TurnEnv(recorder, provider, client, tools, keep_blob=keep)
    assert await Turn(env, [TextContent("go")]).run() == "end_turn"
    await recorder.close()
    [result] = [e for e in recorder.log.events() if type(e) is ToolResult]
    assert (result.data.call_id, result.data.checkpoints, kept_blobs) == ("call_1", UNSET, [])
