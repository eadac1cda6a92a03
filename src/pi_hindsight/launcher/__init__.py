"""The local Hindsight launcher: PostgreSQL + pgvector, Hindsight, and an optional LLM stand-in.

Public API::

    start_server(state_dir, *, port=None, llm="env", timeout=240.0, host=None,
                 api_key_env=None) -> ServerInfo
    stop_server(state_dir, *, timeout=30.0) -> StopReport
    server_status(state_dir) -> ServerStatus
    recorded_base_url(state_dir) -> str | None

See docs/server.md for where things live and which environment variables matter.
"""

from __future__ import annotations

from pi_hindsight.launcher.reports import ServerInfo, ServerStatus, StoppedProcess, StopReport
from pi_hindsight.launcher.server_control import (
    recorded_base_url,
    server_status,
    start_server,
    stop_server,
)
from pi_hindsight.launcher.server_record import LlmMode

__all__ = [
    "LlmMode",
    "ServerInfo",
    "ServerStatus",
    "StopReport",
    "StoppedProcess",
    "recorded_base_url",
    "server_status",
    "start_server",
    "stop_server",
]
