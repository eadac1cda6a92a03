"""Names the Claude Code host gives things: its host facts (document keys and retain wording
derive from them), its MCP server's name and what Claude Code makes of it."""

from __future__ import annotations

from pi_hindsight.engine.memory_block import FRAMING
from pi_hindsight.engine.types import HostFacts

# Claude Code passes a hook's additionalContext up to 10,000 characters intact; a longer one is
# saved to a file and the model gets a 2 KB preview. The block stays under it, with room — also
# at SessionStart, where the framing (stated once per session) comes before the memo's block.
CONTEXT_LIMIT_CHARS = 10_000
BLOCK_LIMIT_CHARS = 9_600 - len(FRAMING) - 2
# Documents: ``claude-code-session-<session id>`` (one per session, appended per request) and
# ``claude-code-<note id>``; retain context "Claude Code coding session in project <id>".
# Claude Code's own slash command that registers the launch directory.
REGISTER_COMMAND = "hindsight-register"
CLAUDE_CODE_HOST = HostFacts(
    name="claude-code",
    label="Claude Code",
    max_block_chars=BLOCK_LIMIT_CHARS,
    register_in_host=f"/{REGISTER_COMMAND}",
)

# The MCP server's name in Claude Code's config: its tools are ``mcp__hindsight__<tool>``.
MCP_SERVER_NAME = "hindsight"
OWN_TOOL_PREFIX = f"mcp__{MCP_SERVER_NAME}__"
REGISTER_COMMAND_DESCRIPTION = "Register this directory for Hindsight memory (pi-hindsight)"
REGISTER_COMMAND_ARGS = "[path]"
