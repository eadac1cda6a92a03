"""Where state lives.

All state is user-owned and lives outside any repository, under one directory:
``$PI_HINDSIGHT_STATE_DIR`` when set, else ``<pi agent dir>/hindsight``. Pi's agent dir is
``$PI_CODING_AGENT_DIR`` when set, else ``~/.pi/agent`` (Pi's own rule).
"""

from __future__ import annotations

import os
from pathlib import Path

STATE_DIR_ENV = "PI_HINDSIGHT_STATE_DIR"
AGENT_DIR_ENV = "PI_CODING_AGENT_DIR"


def pi_agent_dir(env: os._Environ[str] | dict[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    configured = env.get(AGENT_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".pi" / "agent"


def state_dir(env: os._Environ[str] | dict[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    configured = env.get(STATE_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    return pi_agent_dir(env) / "hindsight"


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) and make it owner-only (0700)."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)
    return path
