"""What `acp-server serve` was asked to do (SPEC 8), as one immutable value."""

from __future__ import annotations

from pathlib import Path

import msgspec

from ..agent.limits import DEFAULT_MAX_STEPS
from ..agent.mcp_config import DEFAULT_CALL_TIMEOUT, DEFAULT_CONNECT_TIMEOUT
from ..core.compaction import DEFAULT_COMPACT_AT
from ..core.prompt_render import PromptBase
from ..core.titles import TitleMode
from ..providers.secret import Secret
from ..storage.jsonl.lines import Compression
from ..storage.url import StoreUrl
from ..transports.stdio import DEFAULT_MAX_LINE_BYTES


class ServeConfig(msgspec.Struct, frozen=True):
    sessions_dir: Path
    store: StoreUrl | None = None
    """`--store URL`: where the sessions are (SPEC 2.6); None: JSONL in `sessions_dir`."""
    store_read: str | None = None
    """`--store-read URL`: a PostgreSQL store's standbys, read first (it may hold a password:
    never shown as given); None: every read goes to `store`."""
    store_source: str = ""
    """Where the store was named, as a phrase ("from --store", "from $ACP_SERVER_STORE"), for
    the log line that names the store at start."""
    store_retry: float = 30.0
    """`--store-retry SECONDS`: how long a database writer reconnects before its turn fails."""
    replay: Path | None = None
    """A fixture (`session.jsonl` or a scenario directory); None: the bundled demo recording."""
    replay_override: Path | None = None
    pace_ms: int = 0
    max_steps: int = DEFAULT_MAX_STEPS
    compression: Compression = "none"
    pack: bool = True
    log_level: str = "warning"
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    provider: str = "llm-replay"
    """A name of `acp_server.providers.registry.PROVIDER_NAMES`."""
    model: str | None = None
    """A live provider: the model name sent with every request."""
    base_url: str | None = None
    """A live provider's API root; None: its default."""
    api_key_env: str | None = None
    """The environment variable holding the API key (the key itself is never a flag); None:
    the provider's default."""
    api_key: Secret | None = None
    """The key itself, which the command line has found (`acp_server.providers.secret`)."""
    connect_timeout: float | None = None
    read_timeout: float | None = None
    max_retries: int | None = None
    max_tokens: int | None = None
    thinking_budget: int | None = None
    mcp_timeout: float = DEFAULT_CALL_TIMEOUT
    """Seconds an MCP tool call may take before it is an error result (`--mcp-timeout`)."""
    mcp_connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    """Seconds a session's MCP servers get to connect (`--mcp-connect-timeout`)."""
    mode: str = "default"
    """The mode of a new session (SPEC 4.4)."""
    titles: TitleMode | None = None
    """How a session gets an automatic title (`--titles`); None: the provider's default
    (`core.titles.default_title_mode`)."""
    models: tuple[str, ...] = ()
    """`--provider openai`: more models to offer beside `model`."""
    reasoning: str | None = None
    """`--provider openai`: the default reasoning effort; None offers no reasoning option."""
    context_window: int | None = None
    """The model's context window for `usage_update`; None: the table of known models."""
    compact_at: float = DEFAULT_COMPACT_AT
    """The share of the context window at which a session compacts by itself (SPEC 4.6)."""
    price_input: float | None = None
    """USD per million input tokens, for the cost in `usage_update` (with `price_output`)."""
    price_output: float | None = None
    listen: tuple[str, int] | None = None
    """`--listen HOST:PORT`: serve over WebSocket there instead of stdio (SPEC 3.4)."""
    token: Secret | None = None
    """`--token-file`'s token; None: one is made at start."""
    allowed_origins: tuple[str, ...] = ()
    """`--allow-origin`: more origins whose pages may open the WebSocket."""
    detached_permission_timeout: float = 600.0
    """Seconds a permission request waits for a client to attach to its session when none is
    (`--detached-permission-timeout`); then it is rejected, logged as `timeout`."""
    max_pending_requests: int = 64
    """Requests one WebSocket connection may have in flight at once."""
    socket: Path | None = None
    """`--socket PATH`: serve many connections on this Unix socket instead of stdio (the
    shared server of `acp-server attach`)."""
    system_prompt: PromptBase | None = None
    """`--system-prompt-file`'s text, in place of the package's fixed text of the system
    prompt; None: the package's (a live provider), or none (llm-replay)."""
