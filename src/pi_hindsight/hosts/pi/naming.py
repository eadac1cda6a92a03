"""Names the Pi host gives things: its hidden message's type, and the host facts the engine
takes as typed input (document keys and retain wording derive from them, see
``engine/types.py`` ``HostFacts``)."""

from __future__ import annotations

from pi_hindsight.engine.types import HostFacts

# The customType of our hidden memory message in Pi (and in Pi's session files).
CUSTOM_TYPE = "hindsight-memory"

# Documents: ``pi-session-<session id>`` (one per session, appended per request) and
# ``pi-<note id>`` (explicit notes); retain context "Pi coding session in project <id>".
PI_HOST = HostFacts(name="pi", label="Pi")
