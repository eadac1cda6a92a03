"""A deterministic OpenAI-compatible LLM stand-in for offline use and tests.

No model is reachable offline, so this package ships one small HTTP server that plays
the two LLMs the project talks to: the model Hindsight uses for extraction, consolidation
and reflect (``/hindsight/v1``), and the model Pi chats with (``/pi/v1``, scripted). It is
a stand-in, not a model: its answers are derived mechanically from the request, so the
same request always gets the same answer. See ``docs/standin.md``.
"""

from pi_hindsight.standin.pi_role import PiScript
from pi_hindsight.standin.server import StandIn

__all__ = ["PiScript", "StandIn"]
