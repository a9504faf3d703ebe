"""The named resources of config.json (§6.3, §6.4, §21): what agents lease or share by name.

Every `secret` field names an entry of secrets.json; values never appear in config.json (§14).
The models (`models.<name>`, their prices) and `spend_cap` are in `choir.config.llm`: choir-agent
reads those, and none of these.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import Field, Tag

from choir.config.base import (
    AbsolutePath,
    ConfigModel,
    Fraction,
    HttpUrl,
    NonEmpty,
    Port,
    Positive,
    discriminator,
    tag_of,
)
from choir.config.git_hosts import DEFAULT_HTTPS_HOSTS, HttpsHost, KnownHostsLine
from choir.config.llm import Usd
from choir.config.names import SecretName


class WorkspaceConfig(ConfigModel):
    """A host directory mounted as /workspace; leased to one agent at a time (§15.4)."""

    path: AbsolutePath
    """Absolute host path of the workspace directory."""


class TtsPrice(ConfigModel):
    """What a TTS model costs: providers bill the characters of the text they speak."""

    characters: Usd
    """USD per million characters spoken (ElevenLabs' $0.30 per 1,000 is 300)."""


class EmbeddingPrice(ConfigModel):
    """What the embedding model costs, in USD per million input tokens."""

    tokens: Usd
    """Per million tokens embedded. The local model reports no billed tokens: its calls cost 0
    (it runs in choird) unless a price above 0 makes their cost unknown."""


class TtsConfig(ConfigModel):
    """A text-to-speech provider (§21.3); v1 supports ElevenLabs only."""

    provider: Literal["elevenlabs"] = "elevenlabs"
    """TTS provider; only `elevenlabs` in v1."""
    model_id: NonEmpty
    """Provider model id, e.g. `eleven_multilingual_v2`."""
    endpoint: HttpUrl = "https://api.elevenlabs.io/v1"
    """Base URL of the provider API."""
    secret: SecretName
    """Secret holding the API key."""
    price: TtsPrice | None = None
    """The model's price, for usage cost; null: a call's cost is unknown, never shown as 0."""


class VoiceSettings(ConfigModel):
    """ElevenLabs voice settings (§21.3)."""

    stability: Fraction = 0.5
    """0..1: lower is more expressive, higher more consistent."""
    similarity_boost: Fraction = 0.75
    """0..1: higher is closer to the original voice."""
    style: Fraction = 0.0
    """0..1 style exaggeration; 0 has the lowest latency."""
    use_speaker_boost: bool = True
    """Boost speaker similarity at some latency cost."""
    speed: Annotated[float, Field(ge=0.5, le=2.0)] = 1.0
    """Playback speed, 0.5..2.0; 1.0 is normal."""


class VoiceProfileConfig(ConfigModel):
    """A named voice: a TTS provider plus voice-specific settings; shared by agents."""

    tts: NonEmpty
    """Name of the TTS provider (a key of `tts`)."""
    voice_id: NonEmpty
    """Provider voice id (ElevenLabs: from the Get Voices endpoint)."""
    output_format: NonEmpty = "mp3_44100_128"
    """Audio format; `opus_48000_*` suits Telegram voice messages."""
    voice_settings: VoiceSettings = VoiceSettings()
    """Voice settings sent with every synthesis request."""


class GitIdentityConfig(ConfigModel):
    """Who an agent commits as; leased so commits are attributable (§14.4)."""

    name: NonEmpty
    """git user.name."""
    email: NonEmpty
    """git user.email."""
    secret: SecretName | None = None
    """Secret with the HTTPS token; null for local repositories or SSH only."""
    https_hosts: list[HttpsHost] = Field(default_factory=lambda: list(DEFAULT_HTTPS_HOSTS))
    """Hosts the token is offered to over HTTPS (`host` or `host:port`, as in the remote URL);
    any other host gets no credential. Default: github.com and gitlab.com."""
    ssh_key_secret: SecretName | None = None
    """Secret holding an SSH private key (OpenSSH or PEM text, no passphrase): loaded into an
    ssh-agent inside the agent, never written to disk there; needs `ssh_known_hosts`."""
    ssh_known_hosts: list[KnownHostsLine] = Field(default_factory=list)
    """The SSH servers the key may be used with, pinned: known_hosts lines (`ssh-keyscan -p PORT
    HOST` prints them). The agent's ssh refuses any host whose key is not listed here."""


class NotionConfig(ConfigModel):
    """A Notion integration, leased to one agent at a time."""

    secret: SecretName
    """Secret holding the integration token."""
    endpoint: HttpUrl | None = None
    """Override of the Notion API's base URL (default `https://api.notion.com`)."""


class EmailAccountConfig(ConfigModel):
    """A mail account reached over SMTP (send) and IMAP (read)."""

    smtp_host: NonEmpty
    """SMTP server host name."""
    smtp_port: Port = 587
    """SMTP server port."""
    imap_host: NonEmpty
    """IMAP server host name."""
    imap_port: Port = 993
    """IMAP server port."""
    sharing: Literal["exclusive", "shared"] = "exclusive"
    """`exclusive`: leased to one agent at a time; `shared`: any number may send from it."""
    secret: SecretName
    """Secret holding the account credentials as `username:password` (split at the first
    colon: the password may hold more)."""
    address: NonEmpty | None = None
    """The From address of sent mail; default: the username when it is an address."""
    smtp_security: Literal["tls", "starttls", "none"] | None = None
    """How SMTP is protected; default `tls` on port 465, `starttls` otherwise. `none` sends the
    password in clear text: only for a server on this host."""
    imap_security: Literal["tls", "starttls", "none"] | None = None
    """How IMAP is protected; default `tls` on port 993, `starttls` otherwise."""
    ca_cert: NonEmpty | None = None
    """A CA certificate (PEM text) to trust besides the system's, for a server with a private
    CA; the servers' names are still checked."""


class SearchConfig(ConfigModel):
    """A web search provider; shared and stateless."""

    provider: Literal["brave"] = "brave"
    """Search API; only `brave` in v1."""
    endpoint: HttpUrl | None = None
    """Override of the provider's API base URL."""
    secret: SecretName
    """Secret holding the API key."""


LOCAL_EMBEDDING_PROVIDER: Final = "local"
"""The embedded default: wordllama's 256-dim model inside choir's own wheel, no key, no network."""
LOCAL_EMBEDDING_DIMENSIONS: Final = 256
"""The size of the local model's vectors (wordllama `l2_supercat`)."""
DEFAULT_EMBEDDING_MODEL: Final = "text-embedding-3-small"
"""§11.9's model when an OpenAI-compatible provider names none."""
DEFAULT_EMBEDDING_DIMENSIONS: Final = 1536
"""text-embedding-3-small's size: an OpenAI-compatible provider's default dimensions."""
KNOWN_EMBEDDING_ENDPOINTS: Final = {
    "openrouter": "https://openrouter.ai/api/v1",
    "openai": "https://api.openai.com/v1",
}
"""Providers whose API base URL is known, so `endpoint` may be left out; both need a key."""
MAX_INDEXED_DIMENSIONS: Final = 2000
"""pgvector's HNSW index takes vectors of at most 2000 dimensions (choir.store.agent_schema)."""
EMBEDDING_HOT_FIELDS: Final = frozenset(
    {"endpoint", "secret", "timeout_s", "query_timeout_ms", "price"}
)
"""Fields choird applies at `config apply` (the endpoint moved, the key rotated): the vectors
stay comparable. `provider`, `model` and `dimensions` change what a vector means: choird uses
them from its next start, and the stored vectors need re-embedding."""


class EmbeddingConfig(ConfigModel):
    """The embedding model of memory search (§11.9). Absent (or null): the local model."""

    provider: NonEmpty = LOCAL_EMBEDDING_PROVIDER
    """`local` (the default: wordllama, 256 dims, runs inside choird), or who serves an
    OpenAI-compatible `/embeddings` API: `openrouter`, `openai`, or any name with an `endpoint`."""
    model: NonEmpty | None = None
    """The provider's model id; default `text-embedding-3-small`. Not used by `local`."""
    dimensions: Positive | None = None
    """Vector size; the pgvector column is `vector(dimensions)`. Default: 256 for `local`,
    1536 otherwise. Changing it (or the model) needs choird restarted and memory re-embedded."""
    endpoint: HttpUrl | None = None
    """Base URL of the embeddings API (`/embeddings` is appended); default for `openrouter` and
    `openai`, required for any other OpenAI-compatible provider. Hot-reloaded."""
    secret: SecretName | None = None
    """Secret holding the API key; required for `openrouter` and `openai`. Hot-reloaded."""
    timeout_s: Annotated[float, Field(gt=0.0, le=600.0)] = 30.0
    """Longest wait for one embeddings request; past it the request is retried. Hot-reloaded."""
    query_timeout_ms: Annotated[int, Field(ge=10, le=60_000)] = 1_000
    """Longest a memory search waits for its query's vector; past it the search is a text
    search. Hot-reloaded."""
    price: EmbeddingPrice | None = None
    """The model's price, for usage cost; null: an embedding call's cost is unknown (never
    shown as 0) — except the local model's, which runs in choird and costs nothing.
    Hot-reloaded."""

    @property
    def local(self) -> bool:
        """Whether the embedded local model embeds."""
        return self.provider == LOCAL_EMBEDDING_PROVIDER

    @property
    def cost_price(self) -> EmbeddingPrice | None:
        """What a call is costed at: `price`, or 0 for the local model without one."""
        if self.price is None and self.local:
            return EmbeddingPrice(tokens=0)
        return self.price

    @property
    def vector_dimensions(self) -> int:
        """The size of every vector, configured or the provider's default."""
        if self.dimensions is not None:
            return self.dimensions
        return LOCAL_EMBEDDING_DIMENSIONS if self.local else DEFAULT_EMBEDDING_DIMENSIONS

    @property
    def model_name(self) -> str:
        """The model that embeds: `local`, or the OpenAI-compatible model id."""
        if self.local:
            return LOCAL_EMBEDDING_PROVIDER
        return self.model or DEFAULT_EMBEDDING_MODEL

    @property
    def base_url(self) -> str | None:
        """The API base URL: configured, or known for the provider; None for `local`."""
        if self.local:
            return None
        return self.endpoint or KNOWN_EMBEDDING_ENDPOINTS.get(self.provider)


class TelegramGateway(ConfigModel):
    """A Telegram bot (§19); its configured DMs form its allowlist."""

    type: Literal["telegram"]
    """Gateway kind."""
    secret: SecretName
    """Secret holding the bot token."""
    base_url: HttpUrl | None = None
    """Bot API base URL, for a local Bot API server; default is Telegram's."""


class ConsoleGateway(ConfigModel):
    """The built-in console channel used by the TUI chat pane and `choirctl chat`."""

    type: Literal["console"]
    """Gateway kind."""


GatewayConfig = Annotated[
    Annotated[TelegramGateway, Tag(tag_of("type", "telegram"))]
    | Annotated[ConsoleGateway, Tag(tag_of("type", "console"))],
    discriminator("type", ("telegram", "console"), "gateway type"),
]


class DmConfig(ConfigModel):
    """A DM binding: one user on one gateway; one agent per DM at a time (§19.4)."""

    gateway: NonEmpty
    """Name of the gateway (a key of `gateways`)."""
    user_id: NonEmpty
    """The user's id on that gateway (Telegram: the numeric user id, as a string)."""
    admin: bool = False
    """Admin DMs may run admin commands and approve any agent's approvals."""
    job_cards: bool = True
    """Telegram: each core job of the DM's agent gets a live card (one message edited as the
    job runs, with [Cancel] and [Inject…] buttons); false sends none."""
    approvals: Literal["bound", "all"] = "bound"
    """Telegram: which approval messages the DM gets — `bound`, those of the agent bound to it;
    `all` (admin DMs only), every agent's as well, each decidable there."""


class EmbeddedPostgres(ConfigModel):
    """PostgreSQL with pgvector run by choird itself, data under $CHOIR_HOME/pgdata."""

    embedded: Literal[True] = True
    """Run the bundled PostgreSQL."""


class ExternalPostgres(ConfigModel):
    """An existing PostgreSQL server with pgvector; the database must exist (§6.2)."""

    embedded: Literal[False] = False
    """Connect to an existing server."""
    host: NonEmpty
    """Server host name or socket directory."""
    port: Port = 5432
    """Server port."""
    database: NonEmpty
    """Database choir owns; choird creates per-agent schemas in it."""
    user: NonEmpty = "postgres"
    """Role that can create schemas and roles."""
    secret: SecretName
    """Secret holding the password of `user`."""


def _postgres_kind(data: Any) -> str:
    """The §6.3 example has no `embedded` key: a `host` means an external server."""
    return "false" if "host" in data else "true"


PostgresConfig = Annotated[
    Annotated[EmbeddedPostgres, Tag(tag_of("embedded", True))]
    | Annotated[ExternalPostgres, Tag(tag_of("embedded", False))],
    discriminator("embedded", ("true", "false"), "postgres mode", infer=_postgres_kind),
]
