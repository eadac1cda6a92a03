"""The memory tools in Claude Code: an MCP server on stdio (the official ``mcp`` SDK), run by
Claude Code once per session as ``pi-hindsight claude-code mcp``.

It holds no engine: tool listing and calls go to the per-user daemon, where the session's engine
runs the same ``pi_hindsight.tools`` code the Pi tools use (``hindsight_memory``,
``hindsight_retain_global``). Which session: ``CLAUDE_CODE_SESSION_ID`` and the launch directory
(``CLAUDE_PROJECT_DIR``), as Claude Code sets them for its MCP servers. An unregistered
location lists no tools (as in Pi).

Results are plain text content (no output schema: Claude Code would hand the model the
structured JSON ``{"result": …}`` instead). Each tool carries ``_meta: {"anthropic/alwaysLoad":
true}`` so Claude Code puts it in the request's tools up front instead of behind ToolSearch
(``setup`` also sets ``alwaysLoad`` on the server entry).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server

from pi_hindsight import __version__
from pi_hindsight.hosts.claude_code import runtime
from pi_hindsight.hosts.claude_code.hook import DaemonUnavailable, call
from pi_hindsight.hosts.claude_code.naming import MCP_SERVER_NAME

logger = logging.getLogger(__name__)

LIST_TIMEOUT_S = 15.0
ALWAYS_LOAD = {"anthropic/alwaysLoad": True}


def _where() -> tuple[str, str]:
    session_id = os.environ.get("CLAUDE_CODE_SESSION_ID") or f"mcp-{os.getpid()}"
    return session_id, os.environ.get("CLAUDE_PROJECT_DIR") or str(Path.cwd())


def _env() -> dict[str, str]:
    """The user's environment: what the launch directory's settings set is not ours to use."""
    try:
        env, ignored = runtime.user_env(os.environ, str(Path.cwd()))
    except runtime.RepositoryEnvError as error:
        raise DaemonUnavailable(str(error)) from error
    for note in ignored:
        logger.warning("%s", note)
    return env


class Tools:
    """The daemon's tool specs for this session, and calls to them."""

    def __init__(self) -> None:
        self.timeouts: dict[str, float] = {}

    async def list(self) -> list[types.Tool]:
        session_id, cwd = _where()
        request = {"op": "tools", "sessionId": session_id, "cwd": cwd}
        try:
            env = _env()
            specs = await asyncio.to_thread(
                functools.partial(call, request, timeout=LIST_TIMEOUT_S, env=env)
            )
        except DaemonUnavailable as error:
            logger.warning("no memory tools: %s", error)
            return []
        tools = []
        for spec in specs if isinstance(specs, list) else []:
            self.timeouts[spec["name"]] = spec["timeoutMs"] / 1000
            tools.append(
                types.Tool.model_validate(
                    {
                        "name": spec["name"],
                        "title": spec["label"],
                        "description": spec["description"],
                        "inputSchema": spec["parameters"],
                        "_meta": ALWAYS_LOAD,
                    }
                )
            )
        return tools

    async def call(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        session_id, cwd = _where()
        request = {
            "op": "call",
            "sessionId": session_id,
            "cwd": cwd,
            "tool": name,
            "arguments": arguments,
        }
        timeout = self.timeouts.get(name, 30.0) + 5.0
        try:
            env = _env()
            result = await asyncio.to_thread(
                functools.partial(call, request, timeout=timeout, env=env)
            )
        except DaemonUnavailable as error:
            text, is_error = f"{name}: memory unavailable ({error})", True
        else:
            text = str(result.get("text", "")) if isinstance(result, dict) else ""
            is_error = bool(result.get("isError")) if isinstance(result, dict) else True
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], is_error=is_error
        )


def build_server() -> Server[Any]:
    tools = Tools()

    async def list_tools(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=await tools.list())

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await tools.call(params.name, dict(params.arguments or {}))

    return Server(
        MCP_SERVER_NAME,
        version=__version__,
        instructions="Long-term project memory (Hindsight) through pi-hindsight.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def _serve() -> None:
    server = build_server()
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main() -> int:
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    asyncio.run(_serve())
    return 0
