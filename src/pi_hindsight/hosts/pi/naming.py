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

# The system prompt section that states the framing of memory on Pi 1.x (a tag of its own: the
# section explains the hindsight-memory blocks, it is not one of them).
FRAMING_SECTION = "hindsight-memory-guide"
