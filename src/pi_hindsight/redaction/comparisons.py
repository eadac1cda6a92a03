"""String literals compared with, or passed to, a secret-named variable or setter (issue 18).

- ``if (api_key == "…")``, ``password !== '…'`` and the reverse ``"…" == password``;
- a call of a secret-named function with one string literal: ``setPassword("…")``,
  ``secret('…')``, ``withApiKey("…")``.

Both are anchored on a literal that is rare in ordinary text (the comparison operator, or ``("``
/ ``('``); the value is the quoted literal (no quote or line break inside, at most 256
characters), scanned once: a value's scan ends at the next quote, and distinct anchors have
distinct quotes, so the scans are disjoint. The name next to it is read from at most 64
characters and only once the value has passed the judge (values.py), so text made of operators
with empty or plain values costs one regex step each.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from pi_hindsight.redaction.names import name_strength
from pi_hindsight.redaction.source import Hit, Source
from pi_hindsight.redaction.values import is_name_like, is_not_a_secret, is_prose, looks_random

__all__ = ["TRIGGERS", "find_comparisons"]

TRIGGERS = (("==", False), ("!=", False), ('("', False), ("('", False))

_FORWARD = re.compile(r"(?:==|!=)=?[ \t]{0,16}+([\"'`])([^\"'`\r\n]{4,256}+)\1")
_REVERSE = re.compile(r"([\"'`])([^\"'`\r\n]{4,256}+)\1[ \t]{0,16}+(?:==|!=)=?[ \t]{0,16}+")
_CALL = re.compile(r"\([ \t]{0,16}+([\"'])([^\"'\r\n]{4,256}+)\1[ \t]{0,16}+\)")
_NAME_BEFORE = re.compile(r"([A-Za-z_$][\w$]{0,63}+)[\"'\]]?[ \t]{0,16}+\Z")
_NAME_AFTER = re.compile(r"[A-Za-z_$][\w$.]{0,63}+")
_SETTER = re.compile(r"(?:set|with|use|get)?_?", re.IGNORECASE)


def _secret_value(value: str, strength: str) -> bool:
    if is_not_a_secret(value) or is_prose(value):
        return False
    if strength == "weak":
        return looks_random(value)
    return len(value) >= 6 and not is_name_like(value)


def _strength(name: str) -> str | None:
    # setPassword / with_api_key: the setter's verb is no part of the name
    verb = _SETTER.match(name)
    bare = name[verb.end() :] if verb and verb.end() < len(name) else name
    return name_strength(bare) or name_strength(name)


def find_comparisons(source: Source) -> Iterator[Hit]:
    text = source.text
    for match in _FORWARD.finditer(text):
        before = _NAME_BEFORE.search(text, max(0, match.start() - 80), match.start())
        strength = None if before is None else _strength(before.group(1))
        if strength and _secret_value(match.group(2), strength):
            yield (match.start(2), match.end(2), "secret_comparison")
    for match in _REVERSE.finditer(text):
        after = _NAME_AFTER.match(text, match.end())
        strength = None if after is None else _strength(after.group().rsplit(".", 1)[-1])
        if strength and _secret_value(match.group(2), strength):
            yield (match.start(2), match.end(2), "secret_comparison")
    for match in _CALL.finditer(text):
        before = _NAME_BEFORE.search(text, max(0, match.start() - 64), match.start())
        strength = None if before is None else _strength(before.group(1))
        if strength and _secret_value(match.group(2), strength):
            yield (match.start(2), match.end(2), "secret_call")
