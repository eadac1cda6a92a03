"""The Claude Code host: hooks, a per-user daemon holding the engines, and an MCP server.

Claude Code runs a hook as a process per event, so the hook (``hook.py``) is a tiny client that
imports nothing of the engine: it forwards the event to a per-user daemon on a unix socket
(``daemon.py``, started on demand, exiting when idle), which holds one engine per Claude Code
session over shared stores and one retain worker (``host.py``). The memory tools are served over
MCP by ``mcp_server.py``, proxying to the same daemon. docs/hosts/claude-code.md.

Kept import-free on purpose: ``python -m pi_hindsight.hosts.claude_code.hook`` must stay cheap.
"""
