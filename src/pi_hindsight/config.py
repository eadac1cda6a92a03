"""Configuration: one typed place for defaults, a documented precedence, validation at the edge.

Precedence (later wins): built-in defaults < user file ``<state dir>/config.json`` (or, when it does
not exist, a legacy ``<pi agent dir>/hindsight.json``) < allowlisted keys of the repository file
``<repo>/.pi/hindsight.json`` < environment.
Invalid values never break Pi: each bad key is reported (file, key, what is wrong, the fix) and
falls back to its default. Loading never mutates ``os.environ``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pi_hindsight.config_migrate import (
    apply_project_limits,
    filter_project_file,
    migrate_legacy,
    set_dotted,
    unknown_keys,
)
from pi_hindsight.errors import ConfigError
from pi_hindsight.paths import ensure_private_dir, pi_agent_dir
from pi_hindsight.paths import state_dir as default_state_dir

CONFIG_FILE_NAME = "config.json"


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)


Profile = Literal["project-only", "project+user", "user-only", "recall-only"]
Topology = Literal["domain-tagged", "isolated-bank"]
BankField = Literal["agent", "project", "session", "channel", "user"]


class HindsightSettings(_Model):
    base_url: str | None = Field(default=None, alias="baseUrl")
    api_key: str | None = Field(default=None, alias="apiKey")


class ProjectBankSettings(_Model):
    bank_id: str = Field(default="pi-coding", alias="bankId", min_length=1, max_length=200)
    mission: str = (
        "Memory of software repositories: their architecture, conventions, engineering decisions "
        "and the reasons behind them, and lessons learned while working on them."
    )


class UserBankSettings(_Model):
    enabled: bool = False
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

    dynamic_bank_id: bool = Field(default=False, alias="dynamicBankId")
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
    skip_trivial: bool = Field(default=True, alias="skipTrivial")


class MemoSettings(_Model):
    """The startup memo: the scope's Hindsight mental model (R-MEMO-1..2)."""

    enabled: bool = True
    max_tokens: int = Field(default=600, alias="maxTokens", ge=0, le=8_000)
    # Hindsight refreshes the memo after consolidation, at most this often (each refresh is a
    # reflect run on the server's LLM).
    min_refresh_interval_s: int = Field(
        default=120, alias="minRefreshIntervalSeconds", ge=0, le=86_400
    )


class RetainSettings(_Model):
    enabled: bool = True
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

    enabled: bool = True
    # Records older than this are deleted; the cap may shorten it (status says so).
    retention_days: float = Field(default=30.0, alias="retentionDays", gt=0, le=3_650)
    # Bytes on disk (main file + WAL, plus kept legacy originals); 50 MB = 50,000,000.
    cap_bytes: int = Field(default=50_000_000, alias="capBytes", ge=1_000_000, le=100_000_000_000)


class Settings(_Model):
    enabled: bool = True
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
    post_retain_reflect: bool = Field(default=False, alias="postRetainReflect")
    evidence: EvidenceSettings = EvidenceSettings()
    memo: MemoSettings = MemoSettings()
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


@dataclass(frozen=True)
class ConfigProblem:
    source: str  # a file path or an environment variable name
    key: str
    message: str
    fix: str
    level: Literal["info", "warning"] = "warning"

    def describe(self) -> str:
        fix = f" ({self.fix})" if self.fix else ""
        return f"{self.source}: {self.key}: {self.message}{fix}"


@dataclass(frozen=True)
class LoadedConfig:
    settings: Settings
    problems: tuple[ConfigProblem, ...]
    path: Path  # our config file (it may not exist)
    user_source: Path | None  # the file the user layer came from (ours, or a legacy one)
    sources: Mapping[str, str]  # dotted key -> where its value came from
    project_file: Path | None = None

    @property
    def warnings(self) -> tuple[ConfigProblem, ...]:
        return tuple(problem for problem in self.problems if problem.level == "warning")


# Environment variables -> dotted config key. Documented in docs/configuration.md.
ENV_KEYS: Mapping[str, str] = {
    "HINDSIGHT_BASE_URL": "hindsight.baseUrl",
    "HINDSIGHT_API_KEY": "hindsight.apiKey",
    "PI_HINDSIGHT_ENABLED": "enabled",
    "PI_HINDSIGHT_PROFILE": "profile",
    "PI_HINDSIGHT_PROJECT_BANK_ID": "banks.project.bankId",
    "PI_HINDSIGHT_USER_BANK_ID": "banks.user.bankId",
    "PI_HINDSIGHT_GLOBAL_BANK_ID": "banks.user.bankId",  # legacy name; the new one wins
    "PI_HINDSIGHT_RECALL_TIMEOUT_MS": "recall.timeoutMs",
    "PI_HINDSIGHT_TIMEOUT_MS": "timeoutMs",
}
LEGACY_FILE_NAMES = ("hindsight.json", "hindsight.jsonc")
PROJECT_FILE_NAMES = (".pi/hindsight.json", ".pi/hindsight.jsonc")


def read_config_file(path: Path) -> dict[str, Any]:
    """Read a JSON (or JSONC for ``.jsonc``) object; ConfigError names the file and the fix."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(
            f"{path}: cannot read: {error}", hint="check the file's permissions"
        ) from error
    try:
        if path.suffix == ".jsonc":
            import json5  # noqa: PLC0415 - only for JSONC files

            loaded = json5.loads(text)
        else:
            loaded = json.loads(text)
    except ValueError as error:
        raise ConfigError(
            f"{path}: not valid JSON: {error}", hint="fix the syntax; defaults are used meanwhile"
        ) from error
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: the top level must be a JSON object", hint="wrap it in {{}}")
    return loaded


def _validate(
    raw: dict[str, Any], source_of: Mapping[str, str], default_source: str
) -> tuple[Settings, list[ConfigProblem]]:
    """Validate ``raw``; drop each invalid key (falling back to its default) and report it."""
    problems: list[ConfigProblem] = []
    for _ in range(50):  # each round removes at least one bad key
        try:
            return Settings.model_validate(raw), problems
        except ValidationError as error:
            for item in error.errors():
                location = tuple(item["loc"])
                key = ".".join(str(part) for part in location)
                problems.append(
                    ConfigProblem(
                        source=_source_for(key, source_of, default_source),
                        key=key,
                        message=f"{item['msg']} (got {item.get('input')!r})",
                        fix="using the default; fix or remove the value",
                    )
                )
                _drop_dotted(raw, location)
    return Settings(), problems  # pragma: no cover - defensive


def _source_for(key: str, source_of: Mapping[str, str], default: str) -> str:
    while key:
        if key in source_of:
            return source_of[key]
        key = key.rpartition(".")[0]
    return default


def _drop_dotted(target: dict[str, Any], location: tuple[str | int, ...]) -> None:
    node: Any = target
    for part in location[:-1]:
        if not isinstance(node, dict) or part not in node:
            return
        node = node[part]
    if isinstance(node, dict):
        node.pop(location[-1], None)


def _leaves(raw: Mapping[str, Any], prefix: str = "") -> list[str]:
    keys: list[str] = []
    for key, value in raw.items():
        if isinstance(value, Mapping) and value:
            keys.extend(_leaves(value, f"{prefix}{key}."))
        else:
            keys.append(f"{prefix}{key}")
    return keys


def _resolve_secret_refs(
    raw: dict[str, Any], env: Mapping[str, str], source: str
) -> list[ConfigProblem]:
    """``hindsight.apiKey`` may be ``{"source": "env", "name": "VAR"}`` (never stored raw)."""
    hindsight = raw.get("hindsight")
    if not isinstance(hindsight, dict) or not isinstance(hindsight.get("apiKey"), dict):
        return []
    reference = hindsight["apiKey"]
    name = reference.get("name")
    if reference.get("source") != "env" or not isinstance(name, str):
        hindsight.pop("apiKey")
        return [
            ConfigProblem(
                source,
                "hindsight.apiKey",
                "unsupported secret reference",
                'use {"source": "env", "name": "VARIABLE"}',
            )
        ]
    value = env.get(name)
    if value:
        hindsight["apiKey"] = value
        return []
    hindsight.pop("apiKey")
    return [
        ConfigProblem(
            source,
            "hindsight.apiKey",
            f"environment variable {name} is not set",
            "export it, or remove the reference",
        )
    ]


def _file_problem(path: Path, error: ConfigError) -> ConfigProblem:
    message = str(error).removeprefix(f"{path}: ")
    return ConfigProblem(str(path), "(file)", message, error.hint or "")


def _read_user_layer(
    path: Path, env: Mapping[str, str], problems: list[ConfigProblem]
) -> tuple[dict[str, Any], Path | None]:
    """Our config file, else the first legacy file found; read errors become problems."""
    candidates = [path] + [pi_agent_dir(dict(env)) / name for name in LEGACY_FILE_NAMES]
    for candidate in candidates:
        if not candidate.exists():
            continue
        raw: dict[str, Any] = {}
        try:
            raw = read_config_file(candidate)
        except ConfigError as error:
            problems.append(_file_problem(candidate, error))
        if candidate != path:
            problems.append(
                ConfigProblem(
                    str(candidate),
                    "(file)",
                    "read the legacy pi-hindsight config",
                    "run `pi-hindsight config migrate --write` to keep it in the new place",
                    level="info",
                )
            )
        return raw, candidate
    return {}, None


def _apply_project_file(
    raw: dict[str, Any],
    project_root: Path,
    sources: dict[str, str],
    problems: list[ConfigProblem],
) -> Path | None:
    """Apply the allowlisted keys of ``<repo>/.pi/hindsight.json``; report the rest as ignored."""
    for name in PROJECT_FILE_NAMES:
        candidate = project_root / name
        if not candidate.exists():
            continue
        try:
            project_raw = read_config_file(candidate)
        except ConfigError as error:
            problems.append(_file_problem(candidate, error))
            return candidate
        kept, ignored = filter_project_file(project_raw)
        applied = apply_project_limits(raw, kept, Settings().model_dump(by_alias=True))
        for change in (*ignored, *applied):
            problems.append(
                ConfigProblem(str(candidate), change.key, change.message, "", change.level)
            )
            if change.message.startswith("set to"):
                sources[change.key] = str(candidate)
        return candidate
    return None


def _apply_environment(
    raw: dict[str, Any], env: Mapping[str, str], sources: dict[str, str]
) -> None:
    for variable, dotted in ENV_KEYS.items():
        value = env.get(variable)
        superseded = variable == "PI_HINDSIGHT_GLOBAL_BANK_ID" and env.get(
            "PI_HINDSIGHT_USER_BANK_ID"
        )
        if value and not superseded:
            set_dotted(raw, dotted, value)
            sources[dotted] = variable


def load_config(
    state_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
    *,
    project_root: Path | None = None,
) -> LoadedConfig:
    """Effective settings: defaults < user file < allowed repository keys < environment."""
    env = os.environ if env is None else env
    directory = default_state_dir(dict(env)) if state_dir is None else state_dir
    path = directory / CONFIG_FILE_NAME
    problems: list[ConfigProblem] = []
    raw, user_source = _read_user_layer(path, env, problems)
    user_name = str(user_source or path)
    raw, changes = migrate_legacy(raw)
    changes.extend(unknown_keys(raw, Settings))
    problems.extend(
        ConfigProblem(user_name, change.key, change.message, "", change.level) for change in changes
    )
    sources = dict.fromkeys(_leaves(raw), user_name)
    problems.extend(_resolve_secret_refs(raw, env, user_name))
    project_file = (
        None if project_root is None else _apply_project_file(raw, project_root, sources, problems)
    )
    _apply_environment(raw, env, sources)
    settings, validation_problems = _validate(raw, sources, user_name)
    return LoadedConfig(
        settings=settings,
        problems=(*problems, *validation_problems),
        path=path,
        user_source=user_source,
        sources=sources,
        project_file=project_file,
    )


def write_config_file(path: Path, data: Mapping[str, Any]) -> None:
    """Write ``data`` as the user config, atomically and owner-only (0600 in a 0700 dir)."""
    ensure_private_dir(path.parent)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    temporary.replace(path)


def redacted(settings: Settings) -> dict[str, Any]:
    """The effective settings as JSON, with the API key hidden."""
    data = settings.model_dump(by_alias=True, mode="json")
    if data.get("hindsight", {}).get("apiKey"):
        data["hindsight"]["apiKey"] = "***"
    return data
