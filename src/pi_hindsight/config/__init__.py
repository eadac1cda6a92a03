"""Configuration: one typed place for defaults, a documented precedence, validation at the edge.

One module per concern, importing only downwards (no cycle):

- ``schema``: the settings models (``Settings`` and its sections); ``cost``: retain's cost bounds.
- ``files``: the config files' names, reading one safely, writing the user's.
- ``layers``: where values come from and in what order (``load_config``, ``LoadedConfig``).
- ``raw``: dotted-key helpers and what a repository file may set; ``migration``: legacy keys.
- ``secret_refs``: an API key named by an environment variable or a key file.
- ``display``: how values and problems are shown (never a secret, never raw hostile text).

What callers use most is re-exported here.
"""

from __future__ import annotations

from pi_hindsight.config.display import ConfigProblem, display_url, redacted
from pi_hindsight.config.files import CONFIG_FILE_NAME, read_config_file, write_config_file
from pi_hindsight.config.layers import ENV_KEYS, LoadedConfig, load_config, validate_raw
from pi_hindsight.config.schema import (
    EvidenceSettings,
    HindsightSettings,
    RecallSettings,
    RetainSettings,
    Settings,
)

__all__ = [
    "CONFIG_FILE_NAME",
    "ENV_KEYS",
    "ConfigProblem",
    "EvidenceSettings",
    "HindsightSettings",
    "LoadedConfig",
    "RecallSettings",
    "RetainSettings",
    "Settings",
    "display_url",
    "load_config",
    "read_config_file",
    "redacted",
    "validate_raw",
    "write_config_file",
]
