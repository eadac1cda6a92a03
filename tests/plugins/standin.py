"""Pytest plugin: the deterministic LLM stand-in, and a Pi agent dir that talks to it.

Load it with ``-p tests.plugins.standin`` (or from a conftest's ``pytest_plugins``).

- ``chat_standin`` (function scope): a fresh :class:`AgentStandIn` (the stand-in package's
  server with the agent-model roles of ``tests/agent_models`` registered) serving in this
  process, its request log in ``tmp_path``; script it with ``chat_standin.set_script({...})``
  and read what reached it with ``chat_standin.requests("pi")``.
- ``write_pi_agent_dir(agent_dir, standin)``: models.json + settings.json pointing Pi's
  ``local`` provider at the stand-in's ``/pi/v1``; ``pi_env(agent_dir)`` is the environment
  to run Pi with (``PI_CODING_AGENT_DIR`` and ``PI_OFFLINE=1``, so the real home is untouched).
- ``pi_binary`` (fixture, parametrised): a real Pi (:class:`PiInstall`) — each test that uses it
  runs on Pi 1.x, and also on Pi 0.73.1 when marked ``@pytest.mark.pi_both("<difference>")`` with
  what the shim does differently there (``SHIM_DIFFERENCES`` in ``tests/plugins/pi_versions.py``,
  the table in docs/shim.md); ``@pytest.mark.pi_only("0.x")`` keeps a test to one line. Skipped,
  with the reason, when that version is not installed. Run it as ``pi_binary.argv(...)`` with
  ``pi_env(agent, pi=pi_binary)``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.agent_models import AgentStandIn
from tests.plugins.pi_versions import (
    DEFAULT_LINE,
    PI_INSTALLS,
    SHIM_DIFFERENCES,
    PiInstall,
    default_install,
)

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


def pi_env(
    agent_dir: Path, base: Mapping[str, str] | None = None, *, pi: PiInstall | None = None
) -> dict[str, str]:
    """The environment to run Pi with: isolated agent dir, no update checks or telemetry, and
    for Pi 1.x its Node first on PATH."""
    env = dict(os.environ if base is None else base)
    env["PI_CODING_AGENT_DIR"] = str(agent_dir)
    env["PI_OFFLINE"] = "1"
    return env if pi is None else pi.env(env)


def _lines_for(metafunc: pytest.Metafunc) -> list[PiInstall]:
    """Pi 1.x by default; both lines with ``pi_both("<difference>")``; ``pi_only`` names lines."""
    name = metafunc.definition.nodeid
    only = metafunc.definition.get_closest_marker("pi_only")
    both = metafunc.definition.get_closest_marker("pi_both")
    if only is not None and both is not None:
        raise pytest.UsageError(f"{name}: pi_only and pi_both exclude each other")
    known = {pi.line for pi in PI_INSTALLS}
    if only is not None:
        allowed = {str(arg) for arg in only.args}
        if not allowed or not allowed <= known:
            raise pytest.UsageError(
                f"{name}: pi_only{only.args!r} names no Pi version line; "
                f"use one or more of {sorted(known)}"
            )
    elif both is not None:
        unknown = [arg for arg in both.args if arg not in SHIM_DIFFERENCES]
        if not both.args or unknown:
            raise pytest.UsageError(
                f"{name}: pi_both{both.args!r} must name what the shim does differently on "
                f"0.73.1, one or more of {sorted(SHIM_DIFFERENCES)} (docs/shim.md, Pi versions)"
            )
        allowed = known
    else:
        allowed = {DEFAULT_LINE}
    return [pi for pi in PI_INSTALLS if pi.line in allowed]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test needing a Pi runs on Pi 1.x, and also on 0.73.1 when marked ``pi_both`` (ids
    ``pi-1.6.0``, ``pi-0.73.1``)."""
    if "pi_binary" not in metafunc.fixturenames:
        return
    installs = _lines_for(metafunc)
    metafunc.parametrize("pi_binary", installs, ids=[pi.test_id for pi in installs], indirect=True)


@pytest.fixture
def pi_binary(request: pytest.FixtureRequest) -> PiInstall:
    """The real Pi of this test's version; skips the test (with the reason) when it is missing."""
    pi: PiInstall = getattr(request, "param", None) or default_install()
    reason = pi.unusable()
    if reason:
        pytest.skip(reason)
    return pi
