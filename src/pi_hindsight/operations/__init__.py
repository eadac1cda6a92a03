"""The operations layer: each user-facing operation defined once (issue 19, item 2).

An :class:`~pi_hindsight.operations.base.Operation` takes typed arguments (a pydantic model),
returns a typed result (a pydantic model) that renders itself as text and dumps itself as JSON.
The agent's tools (``tools/``: Pi and, through the daemon, Claude Code's MCP tools), the CLI
(``cli/``) and Pi's slash commands are thin adapters over these definitions.

One module per family: ``memory_status`` (status, refresh_memo), ``memory_search`` (recall,
reflect), ``memory_notes`` (retain, retain_global), ``memory_fixes`` (forget, correct,
corrections), ``bank_upkeep`` (missions, mental models), ``bank_move`` (moving a scope's
memories: the command line's alone), ``bank_templates`` (templates),
``outbox_upkeep`` (health, retry), ``evidence_pages`` (a page of the ledger), ``scope_seeding``
(seeding a registered scope: the plan, then the outbox); ``memory_actions`` lists the
memory tool's actions; ``base`` holds the shared shapes and what the operations need from a session.
Nothing is imported here: each adapter imports what it uses.
"""
