"""Configuration: one typed place for defaults, a documented precedence, validation at the edge.

Precedence (later wins): built-in defaults < user file ``<state dir>/config.json`` < environment.
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

from pi_hindsight.paths import state_dir as default_state_dir

CONFIG_FILE_NAME = "config.json"


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)


class HindsightSettings(_Model):
    base_url: str | None = Field(default=None, alias="baseUrl")
    api_key: str | None = Field(default=None, alias="apiKey")


class ProjectBankSettings(_Model):
    bank_id: str = Field(default="pi-coding", alias="bankId", min_length=1, max_length=200)
    mission: str = (
        "Memory of software repositories: their architecture, conventions, engineering decisions "
        "and the reasons behind them, and lessons learned while working on them."
    )


class RecallSettings(_Model):
    max_tokens: int = Field(default=800, alias="maxTokens", ge=50, le=20_000)
    budget: Literal["low", "mid", "high"] = "mid"
    timeout_ms: int = Field(default=4_000, alias="timeoutMs", ge=200, le=60_000)


class RetainSettings(_Model):
    enabled: bool = True


class Settings(_Model):
    hindsight: HindsightSettings = HindsightSettings()
    project_bank: ProjectBankSettings = Field(default=ProjectBankSettings(), alias="projectBank")
    recall: RecallSettings = RecallSettings()
    retain: RetainSettings = RetainSettings()
    timeout_ms: int = Field(default=10_000, alias="timeoutMs", ge=500, le=120_000)

    @property
    def prepare_timeout_ms(self) -> int:
        """The shim's bound for ``prepareMemory``: recall's own timeout plus a margin.

        Recall must finish well inside the shim's timeout so the two never disagree: the sidecar
        reports ``backend_unavailable`` itself instead of being cut off by the shim.
        """
        return self.recall.timeout_ms + 1_500


@dataclass(frozen=True)
class ConfigProblem:
    source: str  # a file path or an environment variable name
    key: str
    message: str
    fix: str

    def describe(self) -> str:
        return f"{self.source}: {self.key}: {self.message} ({self.fix})"


@dataclass(frozen=True)
class LoadedConfig:
    settings: Settings
    problems: tuple[ConfigProblem, ...]
    path: Path


# Environment variables -> dotted config key. Documented in docs/configuration.md.
ENV_KEYS: Mapping[str, str] = {
    "HINDSIGHT_BASE_URL": "hindsight.baseUrl",
    "HINDSIGHT_API_KEY": "hindsight.apiKey",
    "PI_HINDSIGHT_PROJECT_BANK_ID": "projectBank.bankId",
    "PI_HINDSIGHT_RECALL_TIMEOUT_MS": "recall.timeoutMs",
}


def _set_dotted(target: dict[str, Any], dotted: str, value: object) -> None:
    parts = dotted.split(".")
    node = target
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[parts[-1]] = value


def _drop_dotted(target: dict[str, Any], location: tuple[str | int, ...]) -> None:
    node: Any = target
    for part in location[:-1]:
        if not isinstance(node, dict) or part not in node:
            return
        node = node[part]
    if isinstance(node, dict):
        node.pop(location[-1], None)


def _validate(
    raw: dict[str, Any], source_of: dict[str, str]
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
                        source=source_of.get(key, source_of.get("*", "config")),
                        key=key,
                        message=f"{item['msg']} (got {item.get('input')!r})",
                        fix="using the default; fix or remove the value",
                    )
                )
                _drop_dotted(raw, location)
    return Settings(), problems  # pragma: no cover - defensive


def load_config(
    state_dir: Path | None = None, env: Mapping[str, str] | None = None
) -> LoadedConfig:
    env = os.environ if env is None else env
    directory = default_state_dir(dict(env)) if state_dir is None else state_dir
    path = directory / CONFIG_FILE_NAME
    raw: dict[str, Any] = {}
    problems: list[ConfigProblem] = []
    source_of: dict[str, str] = {"*": str(path)}
    if path.exists():
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            problems.append(
                ConfigProblem(str(path), "(file)", f"cannot read JSON: {error}", "using defaults")
            )
        else:
            if isinstance(loaded, dict):
                raw = loaded
            else:
                problems.append(
                    ConfigProblem(
                        str(path), "(file)", "the top level must be a JSON object", "using defaults"
                    )
                )
    for variable, dotted in ENV_KEYS.items():
        value = env.get(variable)
        if value:
            _set_dotted(raw, dotted, value)
            source_of[dotted] = variable
    settings, validation_problems = _validate(raw, source_of)
    return LoadedConfig(settings=settings, problems=(*problems, *validation_problems), path=path)
