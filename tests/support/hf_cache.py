"""A Hugging Face hub cache on disk, for the launcher's reranker choice."""

from __future__ import annotations

from pathlib import Path

from pi_hindsight.launcher.reranker import CROSS_ENCODER_MODEL

REVISION = "0123456789abcdef0123456789abcdef01234567"


def fake_cached_model(hf_home: Path, *, weights: bool = True) -> Path:
    """The Hugging Face hub cache layout of Hindsight's cross-encoder, with files that are no
    model (enough for the lookup; loading them fails)."""
    repo = hf_home / "hub" / f"models--{CROSS_ENCODER_MODEL.replace('/', '--')}"
    snapshot = repo / "snapshots" / REVISION
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REVISION)
    (snapshot / "config.json").write_text('{"not": "a model"}')
    if weights:
        (snapshot / "model.safetensors").write_bytes(b"not weights")
    return hf_home
