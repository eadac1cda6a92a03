"""Configuration: one typed place for defaults, a documented precedence, validation at the edge.

Precedence (later wins): built-in defaults < user file ``<state dir>/config.json`` (or, when it does
not exist, a legacy ``<pi agent dir>/hindsight.json``) < allowlisted keys of the repository file
``<repo>/.pi/hindsight.json`` < environment.
Invalid values never break Pi: each bad key is reported (file, key, what is wrong, the fix) and
falls back to its default; a file that cannot be read safely (``safe_files.py``: special file, too
large, not UTF-8, bad JSON, nested too deeply) is reported and its keys are ignored. Loading never
raises and never mutates ``os.environ``. Secrets are never echoed: values of secret-like keys are
described by their type only, and URLs lose their password (:func:`display_url`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, ValidationError
from pydantic_core import PydanticCustomError

from pi_hindsight.config_cost import RetainCostSettings
from pi_hindsight.config_display import (
    ConfigProblem,
    config_notices,
    display_url,
    shown_key,
    shown_value,
    type_name,
)
from pi_hindsight.config_raw import (
    PROJECT_ALLOWED,
    apply_project_limits,
    drop_dotted,
    filter_project_file,
    set_dotted,
)
from pi_hindsight.config_secrets import key_file_path, resolve_secret_refs
from pi_hindsight.errors import ConfigError, InputFileError
from pi_hindsight.legacy.config_keys import migrate_legacy, unknown_keys
from pi_hindsight.paths import ensure_private_dir, pi_agent_dir
from pi_hindsight.paths import state_dir as default_state_dir
from pi_hindsight.redaction_rules import RedactionSettings
from pi_hindsight.redaction_rules import use as use_redaction_rules
from pi_hindsight.relevance import Relevance, RelevanceSettings
from pi_hindsight.safe_files import (
    CONFIG_MAX_BYTES,
    CONFIG_MAX_DEPTH,
    JSONC_MAX_BYTES,
    loads,
    lone_surrogate_paths,
    read_bytes,
)
from pi_hindsight.user_bank import USER_BANK_KEY, UserBankChoice
from pi_hindsight.user_bank import choose as choose_user_bank
from pi_hindsight.user_bank import problem_text as user_bank_problem

CONFIG_FILE_NAME = "config.json"


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


@dataclass(frozen=True)
class LoadedConfig:
    settings: Settings
    problems: tuple[ConfigProblem, ...]
    path: Path  # our config file (it may not exist)
    user_source: Path | None  # the file the user layer came from (ours, or a legacy one)
    sources: Mapping[str, str]  # dotted key -> where its value came from
    project_file: Path | None = None
    user_bank: UserBankChoice | None = None  # the User bank id in effect, and why
    key_file: Path | None = None  # the file hindsight.apiKey is read from, if any

    @property
    def warnings(self) -> tuple[ConfigProblem, ...]:
        return tuple(problem for problem in self.problems if problem.level == "warning")

    def notices(self) -> list[str]:
        """The warnings a session shows, each once: a repository file's as one notice."""
        project = None if self.project_file is None else str(self.project_file)
        return config_notices(self.problems, project, sorted(PROJECT_ALLOWED))


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
# Booleans are strict (true/false only) in files; a variable is text, so these words map.
_ENV_BOOLEANS: Mapping[str, bool] = {"true": True, "1": True, "false": False, "0": False}
_ENV_BOOLEAN_KEYS = frozenset({"enabled"})
LEGACY_FILE_NAMES = ("hindsight.json", "hindsight.jsonc")
PROJECT_FILE_NAMES = (".pi/hindsight.json", ".pi/hindsight.jsonc")
PROBLEMS_PER_SOURCE = 50  # then one "(more)" line


def _comment_fix(path: Path) -> str:
    if path.name == CONFIG_FILE_NAME:
        return (
            "remove them, or keep a commented config in the legacy <pi agent dir>/hindsight.jsonc "
            "instead (JSONC; read only while config.json is absent)"
        )
    return f"remove them, or rename the file to {path.stem}.jsonc (JSONC allows comments)"


def read_config_file(path: Path) -> dict[str, Any]:
    """Read a JSON (or JSONC for ``.jsonc``) object safely (``safe_files``: regular files only,
    size and depth capped, UTF-8); ConfigError names the file, what is wrong and the fix."""
    jsonc = path.suffix == ".jsonc"
    try:
        data = read_bytes(path, max_bytes=JSONC_MAX_BYTES if jsonc else CONFIG_MAX_BYTES)
        loaded = loads(
            data,
            path,
            max_depth=CONFIG_MAX_DEPTH,
            jsonc=jsonc,
            comment_fix=None if jsonc else _comment_fix(path),
        )
    except InputFileError as error:
        raise ConfigError(str(error), hint=error.hint) from error
    if not isinstance(loaded, dict):
        raise ConfigError(
            f"{path}: the top level is {type_name(loaded)}, not a JSON object; not read",
            hint='put the settings in one object, e.g. {"profile": "project-only"}',
        )
    return loaded


def _drop_lone_surrogates(raw: dict[str, Any], source: str) -> list[ConfigProblem]:
    """Keys whose value (or name) holds a lone surrogate escape such as ``"\\ud800"``: JSON
    accepts it, but it is not text and cannot be printed, stored or sent; each key is dropped."""
    dropped: set[tuple[str, ...]] = set()
    for where in lone_surrogate_paths(raw):
        index = next((n for n, part in enumerate(where) if isinstance(part, int)), len(where))
        keys = tuple(str(part) for part in where[:index])
        if keys and keys not in dropped:
            dropped.add(keys)
            drop_dotted(raw, keys)
    return [
        ConfigProblem(
            source,
            shown_key(".".join(keys)),
            "holds a lone surrogate escape (such as \\ud800), which is not text",
            "using the default; fix or remove the value",
        )
        for keys in sorted(dropped)
    ]


def _validation_problem(item: Mapping[str, Any], key: str, source: str) -> ConfigProblem:
    fix = "using the default; fix or remove the value"
    if item["type"] == "bool_type":
        fix = "using the default; write true or false (JSON booleans, no quotes)"
    got = shown_value(item.get("input"), key)
    return ConfigProblem(source, key, f"{item['msg']} (got {got})", fix)


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
                source = _source_for(key, source_of, default_source)
                problems.append(_validation_problem(item, key, source))
                drop_dotted(raw, location)
    return Settings(), problems  # pragma: no cover - defensive


def _source_for(key: str, source_of: Mapping[str, str], default: str) -> str:
    while key:
        if key in source_of:
            return source_of[key]
        key = key.rpartition(".")[0]
    return default


def _leaves(raw: Mapping[str, Any], prefix: str = "") -> list[str]:
    keys: list[str] = []
    for key, value in raw.items():
        if isinstance(value, Mapping) and value:
            keys.extend(_leaves(value, f"{prefix}{key}."))
        else:
            keys.append(f"{prefix}{key}")
    return keys


def _file_problem(path: Path, error: ConfigError, ignored: str) -> ConfigProblem:
    message = str(error).removeprefix(f"{path}: ")
    fix = "; ".join(part for part in (error.hint, ignored) if part)
    return ConfigProblem(str(path), "(file)", message, fix)


def _exists(path: Path) -> bool:
    """Present at all (a dangling symlink too, so that it is reported rather than ignored)."""
    return os.path.lexists(path)


def _read_user_layer(
    path: Path, env: Mapping[str, str], problems: list[ConfigProblem]
) -> tuple[dict[str, Any], Path | None]:
    """Our config file, else the first legacy file found; read errors become problems."""
    candidates = [path] + [pi_agent_dir(dict(env)) / name for name in LEGACY_FILE_NAMES]
    for candidate in candidates:
        if not _exists(candidate):
            continue
        raw: dict[str, Any] = {}
        try:
            raw = read_config_file(candidate)
        except ConfigError as error:
            problems.append(_file_problem(candidate, error, "built-in defaults are used meanwhile"))
        problems.extend(_drop_lone_surrogates(raw, str(candidate)))
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
    """Apply the allowlisted keys of ``<repo>/.pi/hindsight.json``; report the rest as ignored.
    An unreadable file is one problem and changes nothing: memory stays as the user set it."""
    for name in PROJECT_FILE_NAMES:
        candidate = project_root / name
        if not _exists(candidate):
            continue
        try:
            project_raw = read_config_file(candidate)
        except ConfigError as error:
            problems.append(_file_problem(candidate, error, "its settings are ignored"))
            return candidate
        problems.extend(_drop_lone_surrogates(project_raw, str(candidate)))
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
    raw: dict[str, Any],
    env: Mapping[str, str],
    sources: dict[str, str],
    problems: list[ConfigProblem],
) -> None:
    for variable, dotted in ENV_KEYS.items():
        value = env.get(variable)
        superseded = variable == "PI_HINDSIGHT_GLOBAL_BANK_ID" and env.get(
            "PI_HINDSIGHT_USER_BANK_ID"
        )
        if not value or superseded:
            continue
        if lone_surrogate_paths(value):  # bytes that were not UTF-8 in the environment
            problems.append(
                ConfigProblem(variable, dotted, "is not valid UTF-8 text; ignored", "fix it")
            )
            continue
        typed: str | bool = value
        if dotted in _ENV_BOOLEAN_KEYS:
            typed = _ENV_BOOLEANS.get(value.strip().lower(), value)
        set_dotted(raw, dotted, typed)
        sources[dotted] = variable


def _capped(problems: list[ConfigProblem]) -> tuple[ConfigProblem, ...]:
    """At most :data:`PROBLEMS_PER_SOURCE` per file or variable, then one line counting the rest
    (a hostile file cannot flood status or the session)."""
    kept: list[ConfigProblem] = []
    rest: dict[str, list[ConfigProblem]] = {}
    counts: dict[str, int] = {}
    for problem in problems:
        counts[problem.source] = counts.get(problem.source, 0) + 1
        if counts[problem.source] <= PROBLEMS_PER_SOURCE:
            kept.append(problem)
        else:
            rest.setdefault(problem.source, []).append(problem)
    for source, more in rest.items():
        level: Literal["info", "warning"] = (
            "warning" if any(p.level == "warning" for p in more) else "info"
        )
        message = f"{len(more)} more problem(s) not listed"
        kept.append(ConfigProblem(source, "(more)", message, "", level, count=len(more)))
    return tuple(kept)


def load_config(
    state_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
    *,
    project_root: Path | None = None,
) -> LoadedConfig:
    """Effective settings: defaults < user file < allowed repository keys < environment.

    Never raises: whatever the files hold, the result is settings plus the problems found."""
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
    key_file = key_file_path(raw)
    # A reference to a key counts as a configured key, set in this environment or not.
    key_configured = (
        bool(raw.get("hindsight", {}).get("apiKey"))
        if isinstance(raw.get("hindsight"), dict)
        else False
    )
    problems.extend(resolve_secret_refs(raw, env, user_name))
    project_file = (
        None if project_root is None else _apply_project_file(raw, project_root, sources, problems)
    )
    _apply_environment(raw, env, sources, problems)
    settings, validation_problems = _validate(raw, sources, user_name)
    settings, user_bank = _user_bank(settings, raw, sources, key_configured, problems)
    # The process redacts with the rules of the config it loaded (never a repository's).
    use_redaction_rules(settings.redaction.rules)
    return LoadedConfig(
        settings=settings,
        problems=_capped([*problems, *validation_problems]),
        path=path,
        user_source=user_source,
        sources=sources,
        project_file=project_file,
        user_bank=user_bank,
        key_file=key_file,
    )


def _user_bank(
    settings: Settings,
    raw: dict[str, Any],
    sources: Mapping[str, str],
    key_configured: bool,
    problems: list[ConfigProblem],
) -> tuple[Settings, UserBankChoice]:
    """Settings with the User bank id in effect: personal on a shared server (user_bank.py)."""
    user = settings.banks.user
    node: Any = raw
    for part in ("banks", "user", "bankId"):  # still there after validation: a valid id
        node = node.get(part) if isinstance(node, dict) else None
    explicit = isinstance(node, str)
    choice = choose_user_bank(
        user.bank_id,
        sources if explicit else {k: v for k, v in sources.items() if k != USER_BANK_KEY},
        base_url=settings.hindsight.base_url,
        api_key=settings.hindsight.api_key or ("configured" if key_configured else None),
        user_id=settings.bank_naming.user_id,
    )
    report = user_bank_problem(choice, settings.user_bank_active)
    if report is not None:
        message, fix, warning = report
        level: Literal["info", "warning"] = "warning" if warning else "info"
        problems.append(ConfigProblem(choice.basis, USER_BANK_KEY, message, fix, level))
    if choice.bank_id == user.bank_id:
        return settings, choice
    banks = settings.banks.model_copy(
        update={"user": user.model_copy(update={"bank_id": choice.bank_id})}
    )
    return settings.model_copy(update={"banks": banks}), choice


def validate_raw(raw: dict[str, Any], source: str) -> tuple[Settings, list[ConfigProblem]]:
    """Validate one file's (migrated) keys alone: for ``config migrate``."""
    problems = _drop_lone_surrogates(raw, source)
    settings, invalid = _validate(raw, {}, source)
    return settings, [*problems, *invalid]


def write_config_file(path: Path, data: Mapping[str, Any]) -> None:
    """Write ``data`` as the user config, atomically and owner-only (0600 in a 0700 dir)."""
    ensure_private_dir(path.parent)
    text = json.dumps(data, indent=2, ensure_ascii=False)
    if lone_surrogate_paths(text):  # keep such strings as \\u escapes rather than fail
        text = json.dumps(data, indent=2)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text + "\n")
    temporary.replace(path)


def redacted(settings: Settings) -> dict[str, Any]:
    """The effective settings as JSON: the API key hidden, the server URL without its password."""
    data = settings.model_dump(by_alias=True, mode="json")
    hindsight = data.get("hindsight", {})
    if hindsight.get("apiKey"):
        hindsight["apiKey"] = "***"
    if hindsight.get("baseUrl"):
        hindsight["baseUrl"] = display_url(hindsight["baseUrl"])
    return data
