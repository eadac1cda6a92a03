"""Credentials in motion (issue 20, item 4), against the real team server: TLS with a private
CA (``hindsight.caFile``), and a "remote" server reached through an authenticated corporate
proxy only as the environment says — all on loopback (``tests/support/net.py``: a TLS front for
the real Hindsight, a forward proxy mapping ``hindsight.team.test`` to it).

Every output, log and file is searched for the API key and the proxy's password; the proxy's
own view of the traffic holds neither (the key travels inside TLS).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from pi_hindsight.transport import TLS_HINT
from tests.plugins.pi import make_repo
from tests.plugins.team_server import TeamServer
from tests.support.net import Certificates, ForwardProxy, TlsFront, private_ca
from tests.support.retain import exchange, register, wait_until_delivered
from tests.support.sidecar import Sidecar

pytestmark = [pytest.mark.server]

NAME = "hindsight.team.test"  # never resolved: only the proxy knows where it is
KEY_VAR = "TEAM_HINDSIGHT_KEY"
PROXY_USER, PROXY_PASSWORD = "corp-user", f"pw-{uuid.uuid4().hex[:12]}"
NO_PROXY_VARIABLES = ("NO_PROXY", "no_proxy")
PROXY_VARIABLES = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
)


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return private_ca(tmp_path_factory.mktemp("ca"), [NAME, "127.0.0.1"])


@pytest.fixture(scope="module")
def front(team_server: TeamServer, certificates: Certificates) -> Iterator[TlsFront]:
    parts = urlsplit(team_server.base_url)
    served = TlsFront(certificates, (parts.hostname or "127.0.0.1", parts.port or 80))
    yield served
    served.close()


@pytest.fixture
def proxy() -> Iterator[ForwardProxy]:
    served = ForwardProxy({NAME: "127.0.0.1"}, (PROXY_USER, PROXY_PASSWORD))
    yield served
    served.close()


def _env(state: Path, key: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (*PROXY_VARIABLES, *NO_PROXY_VARIABLES)}
    return {**env, "PI_HINDSIGHT_STATE_DIR": str(state), KEY_VAR: key, **extra}


def _developer(root: Path, base_url: str, ca_file: Path | None) -> tuple[Path, Path]:
    state = root / "state"
    state.mkdir(parents=True)
    hindsight: dict[str, Any] = {"baseUrl": base_url, "apiKey": {"source": "env", "name": KEY_VAR}}
    if ca_file is not None:
        hindsight["caFile"] = str(ca_file)
    # Not about recall's time bound: a loaded machine (CI) gets its margin.
    config = {"hindsight": hindsight, "recall": {"timeoutMs": 30_000}}
    (state / "config.json").write_text(json.dumps(config))
    repo = make_repo(root / "app", f"https://example.com/team/{root.name}.git")
    register(state, repo)
    return state, repo


def _status(env: dict[str, str], repo: Path) -> dict[str, Any]:
    completed = subprocess.run(
        [sys.executable, "-m", "pi_hindsight", "status", "--cwd", str(repo), "--json"],
        env=env, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    found: dict[str, Any] = json.loads(completed.stdout)
    return found


def _prepare(sidecar: Sidecar, session: str) -> dict[str, Any]:
    found: dict[str, Any] = sidecar.call(
        "prepareMemory",
        {"requestId": str(uuid.uuid4()), "prompt": "Where is the cache?", "sessionId": session},
    )
    return found


def _secrets_absent(texts: list[str], directories: list[Path], secrets: list[str]) -> None:
    for secret in secrets:
        for text in texts:
            if secret in text:
                at = text.index(secret)
                raise AssertionError(f"{secret!r} in {text[max(0, at - 300) : at + 100]!r}")
        for directory in directories:
            for path in directory.rglob("*"):
                if path.is_file():
                    assert secret.encode() not in path.read_bytes(), path


def test_a_private_ca_works_with_ca_file_and_without_it_the_error_names_the_fix(
    team_server: TeamServer, front: TlsFront, certificates: Certificates, tmp_path: Path
) -> None:
    url = f"https://127.0.0.1:{front.port}"
    seen: list[str] = []
    untrusting, repo = _developer(tmp_path / "untrusting", url, None)
    env = _env(untrusting, team_server.key)
    server = _status(env, repo)["server"]
    seen.append(json.dumps(server))
    assert server["healthy"] is False
    assert "the server's TLS certificate is not trusted" in server["problem"]
    assert TLS_HINT in server["problem"]
    sidecar = Sidecar(untrusting, extra_env={KEY_VAR: team_server.key})
    try:
        sidecar.initialize(repo, "tls-0")
        refused = _prepare(sidecar, "tls-0")
        seen.append(json.dumps(refused))
        assert refused["outcome"] == "backend_unavailable"
        assert "the server's TLS certificate is not trusted" in refused["reason"]
        assert "hindsight.caFile" in json.dumps(refused["notices"])
    finally:
        seen.append(sidecar.stderr)
        sidecar.shutdown()
        sidecar.close()

    trusting, repo = _developer(tmp_path / "trusting", url, certificates.ca)
    env = _env(trusting, team_server.key)
    server = _status(env, repo)["server"]
    seen.append(json.dumps(server))
    assert server["healthy"] is True, server
    sidecar = Sidecar(trusting, extra_env={KEY_VAR: team_server.key})
    try:
        sidecar.initialize(repo, "tls-1")
        sidecar.turn("tls-1", "r1", exchange("Remember: the cache is on the Lyra volume."))
        seen.append(json.dumps(wait_until_delivered(sidecar)))
        answered = _prepare(sidecar, "tls-1")
        seen.append(json.dumps(answered))
        assert answered["outcome"] in ("delivered", "nothing_found"), answered
    finally:
        seen.append(sidecar.stderr)
        sidecar.shutdown()
        sidecar.close()
    _secrets_absent(seen, [untrusting, trusting], [team_server.key])


def test_a_remote_server_goes_through_the_proxy_unless_no_proxy_says_otherwise(
    team_server: TeamServer,
    front: TlsFront,
    certificates: Certificates,
    proxy: ForwardProxy,
    tmp_path: Path,
) -> None:
    url = f"https://{NAME}:{front.port}"
    state, repo = _developer(tmp_path / "remote", url, certificates.ca)
    with_proxy = f"http://{PROXY_USER}:{PROXY_PASSWORD}@127.0.0.1:{proxy.port}"
    env = _env(state, team_server.key, HTTPS_PROXY=with_proxy, NO_PROXY="localhost,.corp.example")
    seen: list[str] = []

    server = _status(env, repo)["server"]
    seen.append(json.dumps(server))
    assert server["healthy"] is True, server
    assert server["proxy"]["description"] == f"http://***@127.0.0.1:{proxy.port} (from HTTPS_PROXY)"
    sidecar = Sidecar(state, extra_env={k: v for k, v in env.items() if k not in os.environ})
    try:
        sidecar.initialize(repo, "remote-1")
        sidecar.turn("remote-1", "r1", exchange("Remember: the cache is on the Vega volume."))
        seen.append(json.dumps(wait_until_delivered(sidecar)))
        # Every status says which proxy is used: the status RPC, Pi's /hindsight, the
        # hindsight_memory tool (Claude Code's status too) — never with its credentials.
        via = f"http://***@127.0.0.1:{proxy.port} (from HTTPS_PROXY)"
        rpc = sidecar.call("status", {})
        assert rpc["backend"]["proxy"]["description"] == via
        command = sidecar.call("command", {"name": "hindsight", "sessionId": "remote-1"})
        tool = sidecar.call(
            "toolCall",
            {"name": "hindsight_memory", "params": {"action": "status"}, "sessionId": "remote-1"},
        )
        seen.extend(json.dumps(shown) for shown in (rpc, command, tool))
        assert f"proxy:   {via}" in command["text"]
        assert f"proxy {via}" in tool["content"][0]["text"]
        answered = _prepare(sidecar, "remote-1")
        seen.append(json.dumps(answered))
        assert answered["outcome"] in ("delivered", "nothing_found"), answered
    finally:
        seen.append(sidecar.stderr)
        sidecar.shutdown()
        sidecar.close()
    assert proxy.refused == []
    # Tunnels only (urllib asks with HTTP/1.0, aiohttp with 1.1), to the name, never resolved.
    assert proxy.requests
    assert all(line.startswith(f"CONNECT {NAME}:{front.port} HTTP/") for line in proxy.requests)
    assert team_server.key.encode() not in proxy.cleartext  # the key went inside TLS

    # NO_PROXY names the server's domain: no proxy, so the name does not resolve — said so.
    connects = len(proxy.requests)
    bypass = _env(state, team_server.key, HTTPS_PROXY=with_proxy, NO_PROXY="team.test")
    server = _status(bypass, repo)["server"]
    seen.append(json.dumps(server))
    assert server["healthy"] is False
    assert server["proxy"]["description"] == "none (bypassed by NO_PROXY)"
    assert len(proxy.requests) == connects

    # The wrong proxy password: the proxy's refusal, without either password.
    wrong = with_proxy.replace(PROXY_PASSWORD, "not-the-proxy-password")
    sidecar = Sidecar(state, extra_env={KEY_VAR: team_server.key, "HTTPS_PROXY": wrong})
    try:
        sidecar.initialize(repo, "remote-2")
        refused = _prepare(sidecar, "remote-2")
        seen.append(json.dumps(refused))
        assert refused["outcome"] == "backend_unavailable"
        assert f"through the proxy http://***@127.0.0.1:{proxy.port}" in refused["reason"]
        assert "407" in refused["reason"]
    finally:
        seen.append(sidecar.stderr)
        sidecar.shutdown()
        sidecar.close()
    evidence = subprocess.run(
        [sys.executable, "-m", "pi_hindsight", "evidence", "list", "--json"],
        env=env, capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    seen.append(evidence)
    _secrets_absent(
        seen, [state], [team_server.key, PROXY_PASSWORD, "not-the-proxy-password", PROXY_USER]
    )
