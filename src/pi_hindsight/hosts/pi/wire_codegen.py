"""Generated views of ``hosts/pi/wire.py``: the shim's TypeScript types and docs/rpc.md's shape
reference. ``scripts/gen_wire.py`` writes them; ``tests/unit/test_wire_contract.py`` fails when a
checked-in copy differs from what this module generates (the wire is defined once, in Python)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pi_hindsight.hosts.pi.wire import METHODS, NOTIFICATIONS, WireModel

Mode = Literal["validation", "serialization"]
DOC_BEGIN = "<!-- wire shapes: generated from src/pi_hindsight/hosts/pi/wire.py; do not edit -->"
DOC_END = "<!-- end of generated wire shapes -->"


_SCALARS = {
    "string": "string",
    "integer": "number",
    "number": "number",
    "boolean": "boolean",
    "null": "null",
    "object": "Record<string, unknown>",
}


def _ts_type(schema: Mapping[str, Any]) -> str:
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if "const" in schema:
        return _literal(schema["const"])
    if "enum" in schema:
        return " | ".join(_literal(value) for value in schema["enum"])
    if "anyOf" in schema:
        return " | ".join(_ts_type(option) for option in schema["anyOf"])
    kind = schema.get("type")
    if kind == "array":
        item = _ts_type(schema.get("items", {}))
        return f"({item})[]" if " | " in item else f"{item}[]"
    return _SCALARS.get(str(kind), "unknown")


def _literal(value: object) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value).lower()


def _interface(name: str, schema: Mapping[str, Any]) -> str:
    required = set(schema.get("required", ()))
    lines = []
    description = schema.get("description")
    if description:
        text = " ".join(str(description).split()).replace("``", "`")
        lines.append(f"/** {text} */")
    lines.append(f"export interface {name} {{")
    for key, prop in schema.get("properties", {}).items():
        optional = "" if key in required else "?"
        lines.append(f"\t{key}{optional}: {_ts_type(prop)};")
    lines.append("}")
    return "\n".join(lines)


def _schemas(model: type[WireModel], mode: Mode) -> dict[str, Mapping[str, Any]]:
    """The model's schema and every schema it refers to, by name."""
    schema = model.model_json_schema(by_alias=True, mode=mode)
    found: dict[str, Mapping[str, Any]] = dict(schema.get("$defs", {}))
    found[model.__name__] = {key: value for key, value in schema.items() if key != "$defs"}
    return found


def typescript() -> str:
    """shim/wire.ts: an interface per params, result and notification shape."""
    blocks: dict[str, str] = {}
    for _, params, result in METHODS:
        for name, schema in _schemas(params, "validation").items():
            blocks.setdefault(name, _interface(name, schema))
        if result is not None:
            for name, schema in _schemas(result, "serialization").items():
                blocks.setdefault(name, _interface(name, schema))
    for _, params in NOTIFICATIONS:
        for name, schema in _schemas(params, "serialization").items():
            blocks.setdefault(name, _interface(name, schema))
    header = (
        "/**\n * The shim <-> sidecar wire shapes, generated from src/pi_hindsight/hosts/pi/wire.py"
        "\n * by scripts/gen_wire.py. Do not edit: change the Python models and regenerate.\n */\n"
    )
    methods = "\n".join(
        f"\t{name}: {{ params: {params.__name__}; "
        f"result: {result.__name__ if result else 'void'} }};"
        for name, params, result in METHODS
    )
    notifications = "\n".join(f"\t{name}: {model.__name__};" for name, model in NOTIFICATIONS)
    return (
        header
        + "\n\n".join(blocks.values())
        + f"\n\n/** Shim → sidecar calls (a `void` result: a notification). */\n"
        f"export interface Methods {{\n{methods}\n}}\n\n"
        f"/** Sidecar → shim notifications. */\nexport interface Notifications {{\n"
        f"{notifications}\n}}\n"
    )


def _doc_fields(schema: Mapping[str, Any]) -> str:
    required = set(schema.get("required", ()))
    fields = [
        f"{key}{'' if key in required else '?'}: {_ts_type(prop)}"
        for key, prop in schema.get("properties", {}).items()
    ]
    return "{" + ", ".join(fields) + "}"


def markdown() -> str:
    """The shape reference section of docs/rpc.md (between DOC_BEGIN and DOC_END)."""
    lines = [DOC_BEGIN, "", "| method | params | result |", "|---|---|---|"]
    for name, params, result in METHODS:
        params_schema = _schemas(params, "validation")[params.__name__]
        result_text = "— (notification)" if result is None else f"`{result.__name__}`"
        fields = _doc_fields(params_schema).replace("|", "\\|")
        lines.append(f"| `{name}` | `{fields}` | {result_text} |")
    lines += ["", "| notification (sidecar → shim) | params |", "|---|---|"]
    for name, model in NOTIFICATIONS:
        schema = _schemas(model, "serialization")[model.__name__]
        fields = _doc_fields(schema).replace("|", "\\|")
        lines.append(f"| `{name}` | `{fields}` |")
    lines += ["", "Result and nested shapes:", ""]
    seen: set[str] = set()
    for _, _, result in METHODS:
        if result is None:
            continue
        for name, schema in _schemas(result, "serialization").items():
            if name not in seen:
                seen.add(name)
                lines.append(f"- `{name}` `{_doc_fields(schema)}`")
    lines += ["", DOC_END]
    return "\n".join(lines)


def splice_markdown(document: str) -> str:
    """``document`` with its generated section replaced by the current one (appended if absent)."""
    generated = markdown()
    if DOC_BEGIN in document and DOC_END in document:
        head, rest = document.split(DOC_BEGIN, 1)
        _, tail = rest.split(DOC_END, 1)
        return head + generated + tail
    return document.rstrip("\n") + "\n\n## Shapes\n\n" + generated + "\n"
