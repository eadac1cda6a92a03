"""Everything that reads what older versions and other integrations left behind: legacy evidence
JSONL (``evidence_formats``, ``evidence_import``). Legacy and foreign config keys are mapped in
``config/migration.py``, with the rest of the configuration."""
