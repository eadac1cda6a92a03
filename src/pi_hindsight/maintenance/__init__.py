"""Selected-bank maintenance, host-neutral: bundled bank templates, missions, mental models, and
moving a scope's memories (docs/bank-maintenance.md).

Every mutating operation is dry-run first: with ``apply=False`` (or ``preview_template``) it
returns exactly the change it would make and changes nothing. Results are frozen dataclasses
that the CLI and the agent tools render (``maintenance.render``) or serialise (``as_json``).

They depend on the ``MemoryBackend`` protocol only (``pi_hindsight.backend``), so importing them
does not import the official client; the caller passes the backend.
"""
