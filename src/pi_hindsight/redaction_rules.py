"""The user's own redaction rules: ``redaction.patterns`` and ``redaction.allow`` (issue 18).

Outside the ``redaction`` package because the config loads it at every start, and importing
that package compiles every detector, which no session's start needs (issue 19).

Read from the user's config only (a repository file cannot set them: config/raw.py keeps only
its allowlisted keys), validated when the config loads, and installed for the process with
:func:`use`; :func:`pi_hindsight.redaction.redact` then applies them to every text.

- ``patterns``: ``{"name": "pattern"}``; each match is replaced with ``[REDACTED:name]``.
- ``allow``: values never redacted: a literal, or a pattern written between slashes
  (``"/^sk_test_fixture_[0-9]+$/"``), which must match the whole detected value.

Patterns are compiled with RE2 (``google-re2``), which matches in time linear in the text and
has no backtracking: a pattern RE2 cannot compile (backreferences, lookaround) is refused with
RE2's reason, so no user pattern can make redaction slow
(docs/adr/0009-user-redaction-rules-re2.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

if TYPE_CHECKING:  # a type only: importing the redaction package compiles its detectors
    from pi_hindsight.redaction.source import Hit

__all__ = [
    "NAME",
    "RedactionSettings",
    "UserRules",
    "compile_pattern",
    "compile_rules",
    "current",
    "use",
]

NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")  # fits the marker [REDACTED:<name>]
_MAX_PATTERN = 1_000
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # the reason goes into our error message, not to stderr
_OPTIONS.max_mem = 8 << 20


def compile_pattern(pattern: str) -> Any:
    """``pattern`` compiled with RE2; ValueError with the reason when it cannot be."""
    if not pattern:
        raise ValueError("an empty pattern would match everywhere")
    if len(pattern) > _MAX_PATTERN:
        raise ValueError(f"a pattern is at most {_MAX_PATTERN} characters")
    try:
        compiled = re2.compile(pattern, _OPTIONS)
    except re2.error as error:
        reason = (
            error.args[0].decode() if error.args and isinstance(error.args[0], bytes) else error
        )
        raise ValueError(
            f"{pattern!r} cannot be matched in linear time ({reason}); backreferences and "
            "lookaround are not supported: write the pattern without them"
        ) from None
    if compiled.search("") is not None:
        raise ValueError(f"{pattern!r} matches the empty string: it would redact nothing useful")
    return compiled


@dataclass(frozen=True)
class UserRules:
    patterns: tuple[tuple[str, Any], ...] = ()
    allow_values: frozenset[str] = frozenset()
    allow_patterns: tuple[Any, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.patterns or self.allow_values or self.allow_patterns)

    def hits(self, text: str) -> Iterable[Hit]:
        for name, pattern in self.patterns:
            for match in pattern.finditer(text):
                start, end = match.span()
                if start < end:
                    yield (start, end, name)

    def allowed(self, value: str) -> bool:
        return value in self.allow_values or any(p.fullmatch(value) for p in self.allow_patterns)


def compile_rules(patterns: Mapping[str, str], allow: Iterable[str]) -> UserRules:
    """Validated rules; ValueError naming the entry at fault and how to fix it."""
    compiled = []
    for name, pattern in patterns.items():
        if not NAME.fullmatch(name):
            raise ValueError(
                f"pattern name {name!r}: use lowercase letters, digits and _ (at most 40), "
                "starting with a letter; it becomes the marker [REDACTED:<name>]"
            )
        try:
            compiled.append((name, compile_pattern(pattern)))
        except ValueError as error:
            raise ValueError(f"redaction.patterns.{name}: {error}") from None
    values, allow_patterns = set(), []
    for entry in allow:
        if len(entry) > 2 and entry.startswith("/") and entry.endswith("/"):
            try:
                allow_patterns.append(compile_pattern(entry[1:-1]))
            except ValueError as error:
                raise ValueError(f"redaction.allow {entry!r}: {error}") from None
        elif entry:
            values.add(entry)
    return UserRules(tuple(compiled), frozenset(values), tuple(allow_patterns))


class RedactionSettings(BaseModel):
    """The ``redaction`` section of the user's config (config/schema.py; docs/security.md)."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)

    patterns: dict[str, str] = Field(default_factory=dict, max_length=100)
    allow: list[str] = Field(default_factory=list, max_length=1_000)
    _rules: UserRules = PrivateAttr(default_factory=UserRules)

    @model_validator(mode="after")
    def _compiles(self) -> RedactionSettings:
        self._rules = compile_rules(self.patterns, self.allow)
        return self

    @property
    def rules(self) -> UserRules:
        return self._rules


@dataclass
class _Installed:
    rules: UserRules


_INSTALLED = _Installed(UserRules())


def use(rules: UserRules) -> None:
    """Install the rules of the loaded user config for this process."""
    _INSTALLED.rules = rules


def current() -> UserRules:
    return _INSTALLED.rules
