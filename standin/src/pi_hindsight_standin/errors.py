"""The stand-in's own errors (it depends on nothing of pi_hindsight).

::

    StandInError       the stand-in cannot start or serve as asked (a port, a log file, a role)
    └── ScriptError    a role's script is invalid; the message names the key, the old one is kept
"""

from __future__ import annotations


class StandInError(Exception):
    """Base class of every error the stand-in raises; carries an optional hint."""

    hint: str | None = None

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        if hint is not None:
            self.hint = hint

    def describe(self) -> str:
        """The message plus the hint, as shown to a person."""
        text = str(self)
        return f"{text}\n  hint: {self.hint}" if self.hint else text


class ScriptError(StandInError):
    """A script is invalid: the message names the bad key; the role keeps its old script."""
