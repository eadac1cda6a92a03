"""Reading the JSON schema a structured-output request asks for, and filling it.

Hindsight asks for structured output in one of two ways (``OpenAICompatibleLLM.call``):
strict mode sends ``response_format: {type: json_schema, json_schema: {schema}}``; the
default soft mode sends ``response_format: {type: json_object}`` and appends the schema to
the first (system) message after a fixed sentence. Both are read here, so the stand-in
answers with the keys the caller's pydantic model declares rather than a guessed set.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pi_hindsight_standin.roles import JsonObject
from pi_hindsight_standin.wire import content_text, messages_of

#: The sentence Hindsight's soft structured-output mode puts before the schema.
SOFT_SCHEMA_MARKER = "You must respond with valid JSON matching this schema:\n"
#: How deep :func:`instance` recurses before giving up on nested objects.
MAX_DEPTH = 8


def requested_schema(body: Mapping[str, Any]) -> JsonObject | None:
    """The JSON schema the request wants the reply to match, or ``None``."""
    response_format = body.get("response_format")
    if isinstance(response_format, Mapping) and response_format.get("type") == "json_schema":
        spec = response_format.get("json_schema")
        if isinstance(spec, Mapping) and isinstance(spec.get("schema"), Mapping):
            return dict(spec["schema"])
    for message in messages_of(body):
        text = content_text(message.get("content"))
        start = text.find(SOFT_SCHEMA_MARKER)
        if start < 0:
            continue
        try:
            schema, _ = json.JSONDecoder().raw_decode(text[start + len(SOFT_SCHEMA_MARKER) :])
        except ValueError:
            return None
        return dict(schema) if isinstance(schema, Mapping) else None
    return None


def wants_json(body: Mapping[str, Any]) -> bool:
    """Whether the request asked for a JSON reply (either structured-output mode)."""
    response_format = body.get("response_format")
    if isinstance(response_format, Mapping) and response_format.get("type") in (
        "json_object",
        "json_schema",
    ):
        return True
    return requested_schema(body) is not None


def resolve(node: Any, root: Mapping[str, Any]) -> JsonObject:
    """``node`` with a local ``$ref`` (``#/$defs/X``) followed; ``{}`` for anything else."""
    seen = 0
    while isinstance(node, Mapping) and isinstance(node.get("$ref"), str) and seen < MAX_DEPTH:
        target: Any = root
        for part in str(node["$ref"]).lstrip("#/").split("/"):
            target = target.get(part) if isinstance(target, Mapping) else None
        node = target
        seen += 1
    return dict(node) if isinstance(node, Mapping) else {}


def _variants(node: JsonObject, root: Mapping[str, Any]) -> list[JsonObject]:
    for key in ("anyOf", "oneOf"):
        options = node.get(key)
        if isinstance(options, list):
            return [resolve(option, root) for option in options]
    return [node]


def allows_null(node: Any, root: Mapping[str, Any]) -> bool:
    """Whether the schema node accepts ``null``."""
    resolved = resolve(node, root)
    for variant in _variants(resolved, root):
        kind = variant.get("type")
        if kind == "null" or (isinstance(kind, list) and "null" in kind):
            return True
    return False


def _concrete(node: JsonObject, root: Mapping[str, Any]) -> JsonObject:
    """The first non-null variant of a union node."""
    for variant in _variants(node, root):
        kind = variant.get("type")
        if kind != "null" and not (isinstance(kind, list) and kind == ["null"]):
            return variant
    return node


def properties(node: Any, root: Mapping[str, Any]) -> dict[str, JsonObject]:
    """The declared properties of an object schema node."""
    resolved = _concrete(resolve(node, root), root)
    raw = resolved.get("properties")
    if not isinstance(raw, Mapping):
        return {}
    return {str(k): dict(v) if isinstance(v, Mapping) else {} for k, v in raw.items()}


def required(node: Any, root: Mapping[str, Any]) -> list[str]:
    resolved = _concrete(resolve(node, root), root)
    raw = resolved.get("required")
    return [str(name) for name in raw] if isinstance(raw, list) else []


def enum_values(node: Any, root: Mapping[str, Any]) -> list[Any]:
    resolved = _concrete(resolve(node, root), root)
    values = resolved.get("enum")
    if isinstance(values, list):
        return values
    if "const" in resolved:
        return [resolved["const"]]
    return []


def array_items(node: Any, root: Mapping[str, Any]) -> JsonObject:
    """The (resolved) item schema of an array node, ``{}`` when undeclared."""
    resolved = _concrete(resolve(node, root), root)
    return resolve(resolved.get("items", {}), root)


def instance(node: Any, root: Mapping[str, Any], *, text: str = "", depth: int = 0) -> Any:
    """A minimal valid value for a schema node.

    Objects get every required property; strings get ``text`` (or an enum's first value, or
    a non-null default); arrays are empty; numbers zero; booleans false. Used for fields the
    stand-in has no particular answer for, so the reply still validates against the caller's
    model.
    """
    resolved = _concrete(resolve(node, root), root)
    choices = enum_values(resolved, root)
    if choices:
        return choices[0]
    if resolved.get("default") is not None:
        return resolved["default"]
    kind = resolved.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "object" or (kind is None and "properties" in resolved):
        if depth >= MAX_DEPTH:
            return {}
        props = properties(resolved, root)
        return {
            name: instance(props.get(name, {}), root, text=text, depth=depth + 1)
            for name in required(resolved, root)
        }
    return {"array": [], "integer": 0, "number": 0.0, "boolean": False, "null": None}.get(
        str(kind), text
    )
