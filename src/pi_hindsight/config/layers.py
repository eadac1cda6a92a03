"""Where the settings come from, and in what order (later wins): built-in defaults < user file
``<state dir>/config.json`` (or, when it does not exist, a legacy ``<pi agent dir>/hindsight.json``)
< allowlisted keys of the repository file ``<repo>/.pi/hindsight.json`` < environment.

Invalid values never break Pi: each bad key is reported (file, key, what is wrong, the fix) and
falls back to its default; a file that cannot be read safely (``safe_files.py``: special file, too
large, not UTF-8, bad JSON, nested too deeply) is reported and its keys are ignored. Loading never
raises and never mutates ``os.environ``. Secrets are never echoed (``display.py``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from pi_hindsight.config.display import ConfigProblem, config_notices, shown_key, shown_value
from pi_hindsight.config.files import (
    CONFIG_FILE_NAME,
    LEGACY_FILE_NAMES,
    PROJECT_FILE_NAMES,
    read_config_file,
)
from pi_hindsight.config.migration import migrate_legacy, unknown_keys
from pi_hindsight.config.raw import (
    PROJECT_ALLOWED,
    apply_project_limits,
    drop_dotted,
    filter_project_file,
    set_dotted,
)
from pi_hindsight.config.schema import Settings
from pi_hindsight.config.secret_refs import key_file_path, resolve_secret_refs
from pi_hindsight.errors import ConfigError
from pi_hindsight.paths import pi_agent_dir
from pi_hindsight.paths import state_dir as default_state_dir
from pi_hindsight.redaction_rules import use as use_redaction_rules
from pi_hindsight.safe_files import lone_surrogate_paths
from pi_hindsight.user_bank import USER_BANK_KEY, UserBankChoice
from pi_hindsight.user_bank import choose as choose_user_bank
from pi_hindsight.user_bank import problem_text as user_bank_problem


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
PROBLEMS_PER_SOURCE = 50  # then one "(more)" line


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
