"""Which reranker the local Hindsight runs: its cross-encoder when the model is there, else ``rrf``.

Hindsight's default reranker is a local cross-encoder (``cross-encoder/ms-marco-MiniLM-L-6-v2``
through sentence-transformers, ~90 MB from the Hugging Face hub, loaded when the server starts).
It is what tells a relevant record from a merely similar one, and it gives every recalled record
a ``reranker`` score the relevance policy can use (``relevance.py``). ``rrf`` (reciprocal rank
fusion, no model) is the fallback: it needs nothing, and recall ranks by the retrieval arms.

``server start --reranker auto`` (the default) chooses the cross-encoder when its model is
available on the machine — already in the Hugging Face cache (looked up on disk, no network), or
downloadable (a bounded check that the hub answers) — and ``rrf`` otherwise, saying why. A
cross-encoder that then fails to load (a damaged cache, a download cut off) is replaced by
``rrf`` at once, with a warning (``lifecycle.py``). The choice is recorded in ``server.json``;
``server status`` and ``status`` show it.

:func:`choose` is the decision, pure; :func:`model_cached` and :func:`hub_reachable` gather its
inputs.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pi_hindsight.serialisation import SnakeRecord

CROSS_ENCODER_MODEL = "cross-encoder/ms-marco-MiniLM-L-6-v2"  # Hindsight's default local model
DEFAULT_ENDPOINT = "https://huggingface.co"
REACH_TIMEOUT_S = 3.0
# What a model needs on disk to load: its config and one form of its weights.
_CONFIG_FILE = "config.json"
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")

Requested = Literal["auto", "cross-encoder", "rrf"]
REQUESTED: tuple[Requested, ...] = ("auto", "cross-encoder", "rrf")
Provider = Literal["cross-encoder", "rrf"]


class Reranker(SnakeRecord):
    """The reranker a server runs, and why."""

    provider: Provider
    why: str
    model: str | None = None
    download: bool = False  # the server downloads the model when it starts

    def env(self) -> dict[str, str]:
        """Hindsight's settings for it. Without a download the server stays off the network."""
        offline = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        if self.provider == "rrf":
            return {"HINDSIGHT_API_RERANKER_PROVIDER": "rrf", **offline}
        env = {
            "HINDSIGHT_API_RERANKER_PROVIDER": "local",
            "HINDSIGHT_API_RERANKER_LOCAL_MODEL": self.model or CROSS_ENCODER_MODEL,
            "HINDSIGHT_API_RERANKER_LOCAL_FORCE_CPU": "true",
        }
        return env if self.download else {**env, **offline}

    @property
    def label(self) -> str:
        name = self.provider if self.model is None else f"{self.provider} ({self.model})"
        return f"{name}: {self.why}"


def fallback(why: str) -> Reranker:
    return Reranker(provider="rrf", why=why)


def choose(
    requested: Requested,
    *,
    cached: bool,
    offline: bool,
    reachable: bool | None,
    unreachable_why: str | None = None,
    model: str = CROSS_ENCODER_MODEL,
) -> Reranker:
    """The reranker to run. ``cached``: the model is in the local cache; ``offline``: the
    environment forbids the hub (``HF_HUB_OFFLINE``); ``reachable``: the hub answered (None: not
    asked). A requested cross-encoder runs whatever the cache says (the server says why if it
    cannot load it, and the launcher falls back)."""
    if requested == "rrf":
        return fallback("asked for (--reranker rrf)")
    if cached:
        return Reranker(
            provider="cross-encoder", why="its model is in the Hugging Face cache", model=model
        )
    if requested == "cross-encoder":
        return Reranker(
            provider="cross-encoder",
            why="asked for (--reranker cross-encoder)",
            model=model,
            download=not offline,
        )
    if offline:
        return fallback(f"{model} is not cached and HF_HUB_OFFLINE forbids downloading it")
    if reachable:
        return Reranker(
            provider="cross-encoder",
            why="its model is downloaded from the Hugging Face hub",
            model=model,
            download=True,
        )
    why = f": {unreachable_why}" if unreachable_why else ""
    return fallback(f"{model} is not cached and the Hugging Face hub is not reachable{why}")


def cache_dir(environ: Mapping[str, str]) -> Path:
    """Where the server's sentence-transformers looks for the model (the same variables)."""
    explicit = environ.get("SENTENCE_TRANSFORMERS_HOME") or environ.get("HF_HUB_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    home = environ.get("HF_HOME") or str(Path(environ.get("HOME", "~")) / ".cache" / "huggingface")
    return Path(home).expanduser() / "hub"


def model_cached(model: str, directory: Path) -> bool:
    """Whether ``model`` is complete in the Hugging Face cache at ``directory`` (its config and
    weights), looked up on disk with huggingface_hub — no network."""
    from huggingface_hub import try_to_load_from_cache  # noqa: PLC0415 - only at server start

    def cached(filename: str) -> bool:
        found = try_to_load_from_cache(model, filename, cache_dir=str(directory))
        return isinstance(found, str) and Path(found).is_file()

    return cached(_CONFIG_FILE) and any(cached(name) for name in _WEIGHT_FILES)


def is_offline(environ: Mapping[str, str]) -> bool:
    return any(
        environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")
        for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def hub_reachable(
    model: str, environ: Mapping[str, str], *, timeout: float = REACH_TIMEOUT_S
) -> tuple[bool, str | None]:
    """Whether the hub (``HF_ENDPOINT`` or huggingface.co) answers for ``model`` within
    ``timeout`` (one HEAD request, the environment's proxy settings as the download would use
    them); (False, why) when not."""
    endpoint = (environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
    request = urllib.request.Request(  # noqa: S310 - the hub's own https endpoint
        f"{endpoint}/api/models/{model}", method="HEAD"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout):  # noqa: S310
            return True, None
    except urllib.error.HTTPError as error:
        return False, f"{endpoint} answered HTTP {error.code}"
    except (urllib.error.URLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", error)
        return False, f"{endpoint}: {reason}"


def select(requested: Requested, environ: Mapping[str, str]) -> Reranker:
    """:func:`choose`, with its inputs gathered from this machine (the hub is asked only when
    the model is not cached and nothing forbids it)."""
    model = environ.get("HINDSIGHT_API_RERANKER_LOCAL_MODEL") or CROSS_ENCODER_MODEL
    if requested == "rrf":
        return choose("rrf", cached=False, offline=True, reachable=None)
    try:
        cached = model_cached(model, cache_dir(environ))
    except (ImportError, OSError, ValueError):
        cached = False
    offline = is_offline(environ)
    reachable, why = (None, None)
    if not cached and not offline and requested == "auto":
        reachable, why = hub_reachable(model, environ)
    return choose(
        requested,
        cached=cached,
        offline=offline,
        reachable=reachable,
        unreachable_why=why,
        model=model,
    )
