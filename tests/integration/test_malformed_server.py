"""A server that is not Hindsight (issue 9, item 6): every answer is a 200 that does not parse
into Hindsight's API. That is the backend's fault — ``backend_unavailable``, retried later —
never the item's: nothing is dead-lettered, nothing is lost, and no parser text reaches Pi."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pi_hindsight.stores.outbox import Outbox
from tests.plugins.pi import make_repo
from tests.support.retain import exchange, register, write_config
from tests.support.sidecar import Sidecar
from tests.support.waiting import wait_until


class _AlwaysHealthy(http.server.BaseHTTPRequestHandler):
    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        body = b'{"status":"healthy"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def not_hindsight() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _AlwaysHealthy)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_answers_that_do_not_parse_never_dead_letter_and_never_leak_parser_text(
    not_hindsight: str, isolated_dirs: Path, tmp_path: Path
) -> None:
    """Issue 9: a server answering ``{"status":"healthy"}`` to every path sent outbox items
    straight to ``dead`` ("validation errors for BankListResponse") and made prepareMemory and
    toolCall fail with -32603 and pydantic text."""
    repo = make_repo(tmp_path / "repo", "https://example.com/t/malformed.git")
    write_config(isolated_dirs, not_hindsight, "malformed-bank")
    register(isolated_dirs, repo)
    sidecar = Sidecar(isolated_dirs)
    try:
        assert sidecar.initialize(repo, "s-1")["enabled"] is True
        for index in range(3):
            assert sidecar.turn("s-1", f"r-{index}", exchange(f"fact {index}"))["queued"] == 1
        prepared = sidecar.call(
            "prepareMemory", {"requestId": "p", "prompt": "where?", "sessionId": "s-1"}
        )
        assert prepared["outcome"] == "backend_unavailable"
        assert "hindsight.baseUrl" in json.dumps(prepared["notices"])
        tool = sidecar.call(
            "toolCall", {"name": "hindsight_memory", "params": {"action": "recall", "query": "x"}}
        )
        assert tool["isError"] is True
        text = json.dumps(tool)
        assert "validation error" not in text and "pydantic" not in text
        # The worker tries, fails and backs off (it would have dead-lettered before).
        status = wait_until(
            lambda: (found := sidecar.call("status", {}))["outbox"]["lastError"] and found,
            "the retain worker's first attempt",
        )
        assert status["outbox"]["dead"] == 0
        assert status["outbox"]["pending"] == 3
        assert "not Hindsight" in (status["outbox"]["lastError"] or "")
    finally:
        sidecar.shutdown()
        sidecar.close()
    outbox = Outbox(isolated_dirs)
    try:
        assert {item.state for item in outbox.items()} <= {"ready", "sending"}
    finally:
        outbox.close()
