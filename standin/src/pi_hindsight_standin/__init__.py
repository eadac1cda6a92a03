"""A deterministic LLM stand-in for offline use and tests (not part of pi-hindsight's wheel).

No model is reachable offline, so this package is one small HTTP server that plays the LLMs
the project talks to. It always serves the model Hindsight uses for extraction, consolidation
and reflect (the role ``hindsight``, under ``/hindsight/v1``); other roles — such as the
scripted agent models the test suite registers (``tests/agent_models/``) — are plugged in as a
name and a handler (``roles.py``). It is a stand-in, not a model: its answers are derived
mechanically from the request, so the same request always gets the same answer. Standard
library only. See ``docs/standin.md``.
"""

from pi_hindsight_standin.errors import ScriptError, StandInError
from pi_hindsight_standin.openai_chat import openai_chat_role
from pi_hindsight_standin.roles import Answer, Handler, RoleRequest, Scripted, SseEvent
from pi_hindsight_standin.server import StandIn

__all__ = [
    "Answer",
    "Handler",
    "RoleRequest",
    "ScriptError",
    "Scripted",
    "SseEvent",
    "StandIn",
    "StandInError",
    "openai_chat_role",
]
