"""``redact`` for modules loaded when a session starts, without loading the redaction tables.

Importing ``pi_hindsight.redaction`` compiles its detectors (a third of the sidecar's imports,
issue 19). No session's start needs them — the first prompt, turn or tool call does — so the
engine, the tools and the hosts call this ``redact``, which imports the real one at its first
call; the sidecar and the Claude Code daemon import it ahead, off the loop, once the first
request is answered (``rpc/sidecar.py``). The behaviour is the redaction package's, unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from pi_hindsight.redaction import Redacted

_redact: Callable[[str], Redacted] | None = None


def redact(text: str) -> Redacted:
    """``pi_hindsight.redaction.redact(text)``."""
    global _redact  # noqa: PLW0603 - the one-time import, cached
    if _redact is None:
        from pi_hindsight.redaction import redact as loaded  # noqa: PLC0415 - the point

        _redact = loaded
    return _redact(text)
