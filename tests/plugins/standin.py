"""Pytest plugin: the deterministic LLM stand-in, and a Pi agent dir that talks to it.

Load it with ``-p tests.plugins.standin`` (or from a conftest's ``pytest_plugins``).

- ``chat_standin`` (function scope): a fresh :class:`AgentStandIn` (the stand-in package's
  server with the agent-model roles of ``tests/agent_models`` registered) serving in this
  process, its request log in ``tmp_path``; script it with ``chat_standin.set_script({...})``
  and read what reached it with ``chat_standin.requests("pi")``.
- ``write_pi_agent_dir(agent_dir, standin)``: models.json + settings.json pointing Pi's
  ``local`` provider at the stand-in's ``/pi/v1``; ``pi_env(agent_dir)`` is the environment
  to run Pi with (``PI_CODING_AGENT_DIR`` and ``PI_OFFLINE=1``, so the real home is untouched).
- ``pi_binary`` (fixture): the real Pi executable from ``$PI_BIN``, else the project's
  ``node_modules/.bin/pi``; the test is skipped, with the reason, when there is none.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.agent_models import AgentStandIn

PI_BIN_ENV = "PI_BIN"
PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_PI_BIN = PROJECT_ROOT / "node_modules" / ".bin" / "pi"
PROVIDER = "local"
MODEL_ID = "local-model"


@pytest.fixture
def chat_standin(tmp_path: Path) -> Iterator[AgentStandIn]:
    """A started stand-in for this test, logging to ``tmp_path/standin-requests.jsonl``."""
    with AgentStandIn(log_path=tmp_path / "standin-requests.jsonl") as standin:
        yield standin


def pi_models_json(standin: AgentStandIn, *, model_id: str = MODEL_ID) -> dict[str, Any]:
    """Pi's models.json for a ``local`` provider served by ``standin``."""
    return {
        "providers": {
            PROVIDER: {
                "baseUrl": standin.pi_base_url,
                "api": "openai-completions",
                "apiKey": "x",
                "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
                "models": [{"id": model_id, "contextWindow": 32000, "maxTokens": 1024}],
            }
        }
    }


def write_pi_agent_dir(
    agent_dir: Path,
    standin: AgentStandIn,
    *,
    model_id: str = MODEL_ID,
    settings: Mapping[str, Any] | None = None,
) -> Path:
    """Write models.json and settings.json so Pi in ``agent_dir`` uses the stand-in."""
    agent_dir.mkdir(parents=True, exist_ok=True)
    models = pi_models_json(standin, model_id=model_id)
    (agent_dir / "models.json").write_text(json.dumps(models, indent=2), encoding="utf-8")
    merged = {"defaultProvider": PROVIDER, "defaultModel": model_id, **(settings or {})}
    (agent_dir / "settings.json").write_text(json.dumps(merged, indent=2), encoding="utf-8")
    return agent_dir


def pi_env(agent_dir: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment to run Pi with: isolated agent dir, no update checks or telemetry."""
    env = dict(os.environ if base is None else base)
    env["PI_CODING_AGENT_DIR"] = str(agent_dir)
    env["PI_OFFLINE"] = "1"
    return env


def find_pi_binary() -> tuple[Path | None, str]:
    """The Pi executable to test with, or ``None`` and why there is none."""
    configured = os.environ.get(PI_BIN_ENV)
    if configured:
        path = Path(configured)
        if path.is_file() and os.access(path, os.X_OK):
            return path, ""
        return None, f"${PI_BIN_ENV}={configured} is not an executable file"
    if DEFAULT_PI_BIN.is_file() and os.access(DEFAULT_PI_BIN, os.X_OK):
        return DEFAULT_PI_BIN, ""
    return None, f"no Pi binary: set ${PI_BIN_ENV} or run `npm ci` (looked for {DEFAULT_PI_BIN})"


@pytest.fixture
def pi_binary() -> Path:
    """The real Pi binary; skips the test (with the reason) when it is not installed."""
    path, reason = find_pi_binary()
    if path is None:
        pytest.skip(reason)
    return path
