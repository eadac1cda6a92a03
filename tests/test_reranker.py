"""The launcher's reranker (issue 17): the choice (pure), its inputs — the Hugging Face cache,
read on disk, and a bounded check of the hub, here against loopback servers only — and the
environment Hindsight gets for each choice. The fallback of a cross-encoder that fails to load
runs against the real server in ``tests/test_launcher.py``."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pi_hindsight.launcher import api_process as hs
from pi_hindsight.launcher.reranker import (
    CROSS_ENCODER_MODEL,
    Reranker,
    cache_dir,
    choose,
    hub_reachable,
    model_cached,
    select,
)
from tests.plugins.pi import LoopbackListener
from tests.support.hf_cache import fake_cached_model


@pytest.mark.parametrize(
    ("requested", "cached", "offline", "reachable", "provider", "download", "why"),
    [
        ("auto", True, True, None, "cross-encoder", False, "in the Hugging Face cache"),
        ("auto", False, False, True, "cross-encoder", True, "downloaded from the Hugging Face"),
        ("auto", False, False, False, "rrf", False, "hub is not reachable: no route"),
        ("auto", False, True, None, "rrf", False, "HF_HUB_OFFLINE forbids downloading"),
        ("rrf", True, False, True, "rrf", False, "asked for (--reranker rrf)"),
        ("cross-encoder", False, True, None, "cross-encoder", False, "asked for"),
        ("cross-encoder", False, False, None, "cross-encoder", True, "asked for"),
    ],
)
def test_the_choice(
    requested: str,
    cached: bool,
    offline: bool,
    reachable: bool | None,
    provider: str,
    download: bool,
    why: str,
) -> None:
    chosen = choose(
        requested,  # type: ignore[arg-type]
        cached=cached,
        offline=offline,
        reachable=reachable,
        unreachable_why="no route",
    )
    assert (chosen.provider, chosen.download) == (provider, download)
    assert why in chosen.why
    assert Reranker.load(chosen.to_json()) == chosen


def test_the_cache_is_read_on_disk(tmp_path: Path) -> None:
    assert cache_dir({"HF_HOME": str(tmp_path)}) == tmp_path / "hub"
    assert cache_dir({"HF_HOME": "/x", "SENTENCE_TRANSFORMERS_HOME": "/st"}) == Path("/st")
    assert not model_cached(CROSS_ENCODER_MODEL, tmp_path / "hub")
    fake_cached_model(tmp_path / "partial", weights=False)
    assert not model_cached(CROSS_ENCODER_MODEL, tmp_path / "partial" / "hub")  # no weights
    fake_cached_model(tmp_path / "full")
    assert model_cached(CROSS_ENCODER_MODEL, tmp_path / "full" / "hub")


class _Hub(http.server.BaseHTTPRequestHandler):
    def do_HEAD(self) -> None:
        self.send_response(200 if self.path.startswith("/api/models/") else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def loopback_hub() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_hub_check_is_bounded_and_says_why(loopback_hub: str) -> None:
    assert hub_reachable(CROSS_ENCODER_MODEL, {"HF_ENDPOINT": loopback_hub}) == (True, None)
    closed = LoopbackListener()  # accepts and closes at once: no answer
    hung = LoopbackListener(hold=True)  # accepts and never answers
    try:
        reachable, why = hub_reachable(CROSS_ENCODER_MODEL, {"HF_ENDPOINT": closed.url})
        assert not reachable and why is not None and closed.url in why
        started = time.monotonic()
        reachable, why = hub_reachable(CROSS_ENCODER_MODEL, {"HF_ENDPOINT": hung.url}, timeout=0.5)
        assert not reachable and time.monotonic() - started < 5
    finally:
        closed.close()
        hung.close()


def test_select_falls_back_to_rrf_offline_and_prefers_a_cached_model(
    tmp_path: Path, loopback_hub: str
) -> None:
    closed = LoopbackListener()
    try:
        unreachable = select("auto", {"HF_HOME": str(tmp_path), "HF_ENDPOINT": closed.url})
    finally:
        closed.close()
    assert unreachable.provider == "rrf" and "not reachable" in unreachable.why
    forbidden = select("auto", {"HF_HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"})
    assert forbidden.provider == "rrf" and "HF_HUB_OFFLINE" in forbidden.why
    downloadable = select("auto", {"HF_HOME": str(tmp_path), "HF_ENDPOINT": loopback_hub})
    assert (downloadable.provider, downloadable.download) == ("cross-encoder", True)
    cached = select("auto", {"HF_HOME": str(fake_cached_model(tmp_path / "home"))})
    assert (cached.provider, cached.download, cached.model) == (
        "cross-encoder",
        False,
        CROSS_ENCODER_MODEL,
    )


def test_hindsight_gets_the_network_only_to_download_the_model() -> None:
    def env(reranker: Reranker | None) -> dict[str, str]:
        return hs.server_env(
            environ={"HOME": "/home/u"},
            mode="mock",
            port=1,
            database_url="postgresql://x",
            standin_url=None,
            reranker=reranker,
        )

    rrf = env(None)
    assert rrf["HINDSIGHT_API_RERANKER_PROVIDER"] == "rrf" and rrf["HF_HUB_OFFLINE"] == "1"
    cached = env(choose("auto", cached=True, offline=False, reachable=None))
    assert cached["HINDSIGHT_API_RERANKER_PROVIDER"] == "local"
    assert cached["HINDSIGHT_API_RERANKER_LOCAL_MODEL"] == CROSS_ENCODER_MODEL
    assert cached["HF_HUB_OFFLINE"] == "1"
    download = env(choose("auto", cached=False, offline=False, reachable=True))
    assert download["HINDSIGHT_API_RERANKER_PROVIDER"] == "local"
    assert "HF_HUB_OFFLINE" not in download and "TRANSFORMERS_OFFLINE" not in download
