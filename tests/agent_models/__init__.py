"""The agent-model roles: the models coding agents talk to, scripted, for tests and the demo.

Test infrastructure, registered into the stand-in server (``pi_hindsight_standin``, its own
distribution) from outside it:

- ``pi_role``: Pi's model (``openai-completions``, streamed), role ``pi`` under ``/pi/v1``.
- ``claude_role``: Claude Code's model (Anthropic Messages, streamed), role ``claude`` under
  ``/claude`` (``ANTHROPIC_BASE_URL``); it takes the Pi role's script grammar.

:class:`AgentStandIn` is the stand-in with these roles registered; the ``chat_standin``
fixture (``tests/plugins/standin.py``) and ``scripts/demo.py`` use it. Importing this package
needs nothing but the stand-in (no pytest), so the demo can use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pi_hindsight_standin import Handler, StandIn
from tests.agent_models import claude_role, pi_role
from tests.agent_models.claude_role import ClaudeRole
from tests.agent_models.pi_role import PiRole, PiScript

__all__ = ["AgentStandIn", "ClaudeRole", "PiRole", "PiScript"]


class AgentStandIn(StandIn):
    """The stand-in serving Hindsight's model and the agent models (``pi``, ``claude``).

    Takes :class:`StandIn`'s arguments; ``roles`` adds to (or replaces) the agent roles.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        log_path: Path | None = None,
        roles: Mapping[str, Handler] | None = None,
        script: Any = None,
    ) -> None:
        agents: dict[str, Handler] = {pi_role.ROLE: PiRole(), claude_role.ROLE: ClaudeRole()}
        roles = {**agents, **(roles or {})}
        super().__init__(host=host, port=port, log_path=log_path, roles=roles, script=script)

    @property
    def pi_base_url(self) -> str:
        """Pi's ``models.json`` ``baseUrl`` for this stand-in (``…/pi/v1``)."""
        return f"{self.url(pi_role.ROLE)}/v1"

    @property
    def claude_base_url(self) -> str:
        """Claude Code's ``ANTHROPIC_BASE_URL`` for this stand-in (``…/claude``)."""
        return self.url(claude_role.ROLE)
