"""The settings' schema: the pydantic models of ``config.json``, their defaults, bounds and the
properties derived from them (which banks are active, the shim's timeout). Validation only: where
values come from is ``layers.py``, how they are shown ``display.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool
from pydantic_core import PydanticCustomError

from pi_hindsight.config.cost import RetainCostSettings
from pi_hindsight.redaction_rules import RedactionSettings
from pi_hindsight.relevance import Relevance, RelevanceSettings


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)


Profile = Literal["project-only", "project+user", "user-only", "recall-only"]
Topology = Literal["domain-tagged", "isolated-bank"]
BankField = Literal["agent", "project", "session", "channel", "user"]


def _check_base_url(value: str | None) -> str | None:
    """An http(s) URL with a host; ``""`` means "not set" (the recorded local server)."""
    if not value:
        return None
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        parts = None
    if (
        parts is None
        or parts.scheme not in ("http", "https")
        or not parts.hostname
        or any(char.isspace() or not char.isprintable() for char in value)
    ):
        raise PydanticCustomError(
            "base_url",
            "must be an http:// or https:// URL with a host, e.g. http://127.0.0.1:8888",
        )
    return value


BaseUrl = Annotated[str | None, AfterValidator(_check_base_url)]


def _check_ca_file(value: str | None) -> str | None:
    """An absolute path (``~`` expanded) to a file of CA certificates; ``""`` means "not set"."""
    if not value:
        return None
    path = Path(value).expanduser()
    if not path.is_absolute() or not path.is_file():
        raise PydanticCustomError(
            "ca_file",
            "must be the absolute path of an existing PEM file of CA certificates",
        )
    return str(path)


class HindsightSettings(_Model):
    base_url: BaseUrl = Field(default=None, alias="baseUrl")
    api_key: str | None = Field(default=None, alias="apiKey")
    # The CA certificates an https:// server's certificate must chain to (a private CA); the
    # user config only (a repository file can never set it).
    ca_file: Annotated[str | None, AfterValidator(_check_ca_file)] = Field(
        default=None, alias="caFile"
    )


class ProjectBankSettings(_Model):
    bank_id: str = Field(default="pi-coding", alias="bankId", min_length=1, max_length=200)
    mission: str = (
        "Memory of software repositories: their architecture, conventions, engineering decisions "
        "and the reasons behind them, and lessons learned while working on them."
    )


class UserBankSettings(_Model):
    enabled: StrictBool = False
    bank_id: str = Field(default="pi-user", alias="bankId", min_length=1, max_length=200)
    mission: str = (
        "Durable preferences of this user and workflows that hold across projects: how they like "
        "to work, tools and conventions they prefer, and rules they keep everywhere."
    )


class BanksSettings(_Model):
    project: ProjectBankSettings = ProjectBankSettings()
    user: UserBankSettings = UserBankSettings()


class BankNamingSettings(_Model):
    """Bank-id derivation styles from the field (R-SCOPE-6); the directory map wins over all."""

    dynamic_bank_id: StrictBool = Field(default=False, alias="dynamicBankId")
    dynamic_bank_granularity: tuple[BankField, ...] = Field(
        default=("agent", "project"), alias="dynamicBankGranularity", min_length=1
    )
    agent_name: str = Field(default="pi", alias="agentName", min_length=1, max_length=64)
    channel: str | None = Field(default=None, max_length=64)
    user_id: str | None = Field(default=None, alias="userId", max_length=64)
    directory_bank_map: dict[str, str] = Field(default_factory=dict, alias="directoryBankMap")


class RecallSettings(_Model):
    max_tokens: int = Field(default=800, alias="maxTokens", ge=50, le=20_000)
    # Default: half of maxTokens (R-RECALL-2); see Settings.user_max_tokens.
    user_max_tokens: int | None = Field(default=None, alias="userMaxTokens", ge=0, le=20_000)
    budget: Literal["low", "mid", "high"] = "mid"
    timeout_ms: int = Field(default=4_000, alias="timeoutMs", ge=200, le=60_000)
    # One ceiling over the whole memory message: memo + project + user sections.
    request_max_tokens: int = Field(default=1_600, alias="requestMaxTokens", ge=100, le=40_000)
    # The query: the prompt plus this many recent conversation turns, within maxQueryChars.
    context_turns: int = Field(default=1, alias="contextTurns", ge=0, le=10)
    max_query_chars: int = Field(default=800, alias="maxQueryChars", ge=100, le=4_000)
    # Acknowledgements ("ok", "thanks", "continue") skip recall; the evidence says so.
    skip_trivial: StrictBool = Field(default=True, alias="skipTrivial")
    # Which recalled records are delivered at all (relevance.py; "off" restores delivering
    # everything recall returns within the budgets).
    relevance: Relevance = RelevanceSettings()


class MemoSettings(_Model):
    """The startup memo: the scope's Hindsight mental model (R-MEMO-1..2)."""

    enabled: StrictBool = True
    max_tokens: int = Field(default=600, alias="maxTokens", ge=0, le=8_000)
    # Hindsight refreshes the memo after consolidation, at most this often (each refresh is a
    # reflect run on the server's LLM).
    min_refresh_interval_s: int = Field(
        default=120, alias="minRefreshIntervalSeconds", ge=0, le=86_400
    )


class RetainSettings(_Model, RetainCostSettings):  # skipTrivial, dailyTokenBudget
    enabled: StrictBool = True
    # What of a request's tool traffic is retained (docs/operations.md, "Outbox"). The memory
    # tools' own calls and results (``hindsight_*``) are never retained, whatever these say.
    # toolCalls: "omit" nothing; "name" a short "(used tool X)" mention; "arguments" the name
    # and its (redacted, truncated) arguments.
    tool_calls: Literal["omit", "name", "arguments"] = Field(default="name", alias="toolCalls")
    # toolResults: "omit" nothing; "errors" only failed results; "all" every result (redacted,
    # each truncated to toolResultMaxChars).
    tool_results: Literal["omit", "errors", "all"] = Field(default="omit", alias="toolResults")
    tool_result_max_chars: int = Field(default=1_000, alias="toolResultMaxChars", ge=100, le=20_000)


class UserRetainSettings(_Model):
    # Effectively single-valued (R-CONF-3); kept for compatibility with older configs.
    mode: Literal["explicit-only"] = "explicit-only"


class EvidenceSettings(_Model):
    """The evidence ledger, ``evidence.sqlite`` (docs/evidence.md; R-EVID-1..7)."""

    enabled: StrictBool = True
    # Records older than this are deleted; the cap may shorten it (status says so).
    retention_days: float = Field(default=30.0, alias="retentionDays", gt=0, le=3_650)
    # Bytes on disk (main file + WAL, plus kept legacy originals); 50 MB = 50,000,000.
    cap_bytes: int = Field(default=50_000_000, alias="capBytes", ge=1_000_000, le=100_000_000_000)


class Settings(_Model):
    enabled: StrictBool = True
    profile: Profile = "project-only"
    topology: Topology = "domain-tagged"
    hindsight: HindsightSettings = HindsightSettings()
    banks: BanksSettings = BanksSettings()
    bank_naming: BankNamingSettings = Field(default=BankNamingSettings(), alias="bankNaming")
    # Explicit project ids for directories (R-SCOPE-5): {"/abs/dir": "my-project"}. User-only.
    project_pins: dict[str, str] = Field(default_factory=dict, alias="projectPins")
    recall: RecallSettings = RecallSettings()
    retain: RetainSettings = RetainSettings()
    user_retain: UserRetainSettings = Field(default=UserRetainSettings(), alias="userRetain")
    user_query_preamble: str | None = Field(default=None, alias="userQueryPreamble", max_length=500)
    post_retain_reflect: StrictBool = Field(default=False, alias="postRetainReflect")
    evidence: EvidenceSettings = EvidenceSettings()
    memo: MemoSettings = MemoSettings()
    redaction: RedactionSettings = RedactionSettings()
    timeout_ms: int = Field(default=10_000, alias="timeoutMs", ge=500, le=120_000)
    # Reflect synthesises with the server's LLM: its own bound (R-REFLECT-2); timeoutMs is not
    # raised for it, and a cancel ends it at once.
    reflect_timeout_ms: int = Field(default=120_000, alias="reflectTimeoutMs", ge=1_000, le=300_000)

    @property
    def prepare_timeout_ms(self) -> int:
        """The shim's bound for ``prepareMemory``: recall's own timeout plus a margin.

        Recall must finish well inside the shim's timeout so the two never disagree: the sidecar
        reports ``backend_unavailable`` itself instead of being cut off by the shim.
        """
        return self.recall.timeout_ms + 1_500

    @property
    def user_max_tokens(self) -> int:
        configured = self.recall.user_max_tokens
        return self.recall.max_tokens // 2 if configured is None else configured

    @property
    def project_recall(self) -> bool:
        return self.profile != "user-only"

    @property
    def project_retain(self) -> bool:
        """Automatic retain: project bank only, and never in Recall Only or User Only."""
        return self.profile in ("project-only", "project+user") and self.retain.enabled

    @property
    def user_bank_active(self) -> bool:
        """The User bank is opt-in (R-CONF-2): on in the profiles that include it."""
        return self.profile in ("project+user", "user-only") or (
            self.profile == "recall-only" and self.banks.user.enabled
        )
