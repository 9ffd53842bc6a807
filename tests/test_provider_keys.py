"""Stored keys per provider (SPEC 4.4), through real processes against loopback model servers.

`acp-server login` stores a key for one provider and API root; a server sends only the key
stored for its own provider and root (or none), whatever other keys are stored beside it. The
loopback servers record each request's headers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp_process import AcpProcess
from anthropic_server import FakeAnthropic, reply, text_block
from openai_server import FakeOpenAI, Sse, chunk, text
from recorded_sessions import clean_env

from acp_server.providers.credentials import CONFIG_DIR_ENV, KeyName, key_name, store_key
from acp_server.providers.secret import Secret

pytestmark = pytest.mark.process

OPENAI_KEY = "sk-openai-Qm4Xw8Rt2Lp6Vb9Nz3Hc7Jd1"
ANTHROPIC_KEY = "sk-ant-Kf5Gs0Yh2Wq7Mv4Bx8Tn1Pr6"


def prompted(server: AcpProcess, cwd: Path) -> dict[str, Any]:
    """A new session given one prompt; the prompt's response."""
    server.initialize()
    session = server.result("session/new", {"cwd": str(cwd), "mcpServers": []})["sessionId"]
    response, _ = server.exchange(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "Hi."}]}
    )
    return response


def serve(tmp_path: Path, config: Path, provider: str, base_url: str) -> AcpProcess:
    flags = ("--provider", provider, "--model", "m", "--base-url", base_url, "--titles", "off")
    env = clean_env(**{CONFIG_DIR_ENV: str(config)})
    return AcpProcess(tmp_path / f"{provider}-sessions", *flags, env=env)


def key_headers(headers: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() in ("authorization", "x-api-key")}


def test_the_anthropic_endpoint_never_sees_the_openai_key(tmp_path: Path) -> None:
    config = tmp_path / "config"
    path = store_key(Secret(OPENAI_KEY), KeyName("openai"), config / "credentials.json")
    with FakeAnthropic([Sse(reply(text_block(0, "Hello.")))]) as model:
        store_key(Secret(OPENAI_KEY), key_name("openai", model.base_url), path)
        with serve(tmp_path, config, "anthropic", model.base_url) as server:
            assert prompted(server, tmp_path)["result"] == {"stopReason": "end_turn"}
            assert server.finish() == 0
    [request] = model.requests
    assert key_headers(request.headers) == {}


def test_each_endpoint_is_sent_the_key_stored_for_its_provider_and_api_root(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config"
    path = config / "credentials.json"
    openai = FakeOpenAI([Sse([text("Hello."), chunk(finish="stop")])])
    anthropic = FakeAnthropic([Sse(reply(text_block(0, "Hello.")))])
    with openai, anthropic:
        store_key(Secret(OPENAI_KEY), key_name("openai", openai.base_url), path)
        store_key(Secret(ANTHROPIC_KEY), key_name("anthropic", anthropic.base_url), path)
        for provider, model in (("openai", openai), ("anthropic", anthropic)):
            with serve(tmp_path, config, provider, model.base_url) as server:
                assert prompted(server, tmp_path)["result"] == {"stopReason": "end_turn"}
                assert server.finish() == 0
    assert [key_headers(r.headers) for r in openai.requests] == [
        {"Authorization": f"Bearer {OPENAI_KEY}"}
    ]
    assert [key_headers(r.headers) for r in anthropic.requests] == [{"x-api-key": ANTHROPIC_KEY}]
