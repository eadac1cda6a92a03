"""How pi-hindsight reaches a server (issue 20, item 4): loopback never through a proxy, a remote
server through the environment's proxy unless NO_PROXY says otherwise, proxy credentials never
shown, a private CA through ``hindsight.caFile``, and a key file that rotates under a running
client. The real official client and urllib run against small loopback servers here; the real
Hindsight behind a proxy and TLS is in tests/integration/test_transport_paths.py."""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pi_hindsight.backend.hindsight import HindsightBackend
from pi_hindsight.cli.status_cmd import _health
from pi_hindsight.config import load_config
from pi_hindsight.credentials import RotatingKey
from pi_hindsight.engine.status import BackendStatus
from pi_hindsight.errors import BackendAuthRejected, BackendUnavailable
from pi_hindsight.hosts.claude_code import runtime
from pi_hindsight.transport import (
    bypassed,
    display_proxy,
    is_loopback_host,
    proxy_route,
)

CLOSED = "http://127.0.0.1:9"  # a port nothing listens on (discard)
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy")


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "127.3.2.1", "::1", "[::1]", "localhost", "LOCALHOST.", "db.localhost",
     "::ffff:127.0.0.1"],
)  # fmt: skip
def test_loopback_hosts_are_recognised(host: str) -> None:
    assert is_loopback_host(host)


@pytest.mark.parametrize(
    "host", ["10.0.0.1", "::", "0.0.0.0", "example.com", "localhost.example.com", "", None]
)
def test_other_hosts_are_not_loopback(host: str | None) -> None:
    assert not is_loopback_host(host)


def test_loopback_never_goes_through_a_proxy_whatever_the_environment_says() -> None:
    everything = dict.fromkeys(PROXY_VARIABLES, CLOSED) | {"NO_PROXY": ""}
    for url in ("http://127.0.0.1:8888", "https://localhost/x", "http://[::1]:1"):
        route = proxy_route(url, everything)
        assert route.url is None and route.reason == "loopback"
        assert route.describe() == "none (loopback: never through a proxy)"


def test_a_remote_server_takes_the_proxy_of_its_scheme_unless_no_proxy_matches() -> None:
    env = {
        "HTTPS_PROXY": "http://corpuser:s3cret-pw@proxy.corp:3128",
        "http_proxy": "http://plain.corp:80",
        "HTTP_PROXY": "http://upper.corp:80",  # lower case wins
        "ALL_PROXY": "http://all.corp:1",
    }
    https = proxy_route("https://hindsight.team.example", env)
    assert https.url == "http://corpuser:s3cret-pw@proxy.corp:3128"
    assert https.variable == "HTTPS_PROXY"
    assert https.describe() == "http://***@proxy.corp:3128 (from HTTPS_PROXY)"
    shown = json.dumps(https.to_json()) + https.describe()
    assert "s3cret-pw" not in shown and "corpuser" not in shown
    plain = proxy_route("http://hindsight.team.example:8888", env)
    assert (plain.url, plain.variable) == ("http://plain.corp:80", "http_proxy")
    only_all = proxy_route("https://h.example", {"ALL_PROXY": "proxy.corp:8080"})
    assert (only_all.url, only_all.variable) == ("http://proxy.corp:8080", "ALL_PROXY")
    for no_proxy in ("team.example", ".team.example", "*", "x.org, hindsight.team.example"):
        route = proxy_route("https://hindsight.team.example", {**env, "NO_PROXY": no_proxy})
        assert route.url is None and route.describe() == "none (bypassed by NO_PROXY)"
    kept = proxy_route("https://hindsight.team.example", {**env, "no_proxy": "other.example"})
    assert kept.url is not None
    none = proxy_route("https://hindsight.team.example", {})
    assert none.url is None and none.describe() == "none (no proxy variable set)"
    socks = proxy_route("https://h.example", {"ALL_PROXY": "socks5://proxy:1080"})
    assert socks.url is None and socks.reason == "unsupported" and "ALL_PROXY" in socks.describe()


@pytest.mark.parametrize(
    ("host", "port", "no_proxy", "expected"),
    [
        ("a.example.com", 443, "example.com", True),
        ("example.com", 443, ".example.com", True),
        ("badexample.com", 443, "example.com", False),
        ("h.example", 8888, "h.example:8888", True),
        ("h.example", 443, "h.example:8888", False),
        ("10.1.2.3", 80, "10.0.0.0/8", True),
        ("10.1.2.3", 80, "10.1.2.3", True),
        ("11.1.2.3", 80, "10.0.0.0/8", False),
        ("fd00::5", 80, "[fd00::5]:80", True),
        ("H.EXAMPLE", 80, "h.example", True),
        ("h.example", 80, " ,, ", False),
    ],
)
def test_no_proxy_rules(host: str, port: int, no_proxy: str, expected: bool) -> None:
    assert bypassed(host, port, no_proxy) is expected


@given(
    user=st.text(st.characters(codec="ascii", exclude_characters="@/?#[]:"), min_size=1),
    password=st.text(st.characters(codec="ascii", exclude_characters="@/?#[]"), min_size=4),
)
def test_a_proxy_is_never_shown_with_its_credentials(user: str, password: str) -> None:
    url = f"http://{user}:{password}@proxy.corp:3128"
    shown = display_proxy(url)
    assert shown == "http://***@proxy.corp:3128"
    route = proxy_route("https://remote.example", {"HTTPS_PROXY": url})
    assert password not in route.describe() and password not in json.dumps(route.to_json())
    # Every other way the record is shown: pydantic's own JSON, its repr, and nested in status.
    assert password not in route.model_dump_json() and password not in repr(route)
    assert route.to_json()["proxy"] == shown and route.url == url  # used, never shown
    backend = BackendStatus(contacted=True, healthy=False, last_error=None, proxy=route)
    assert not [text for text in _strings(backend.to_json()) if password in text]


def _strings(value: object) -> list[str]:
    """Every string in a JSON value, keys included (a password may spell ``null``)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [*value, *(text for item in value.values() for text in _strings(item))]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return []


class _Answering(http.server.BaseHTTPRequestHandler):
    """A server that answers like Hindsight with a key (``/health`` open), and remembers which
    key each request carried."""

    keys: ClassVar[list[str]] = []
    accepted = "key-one-0123456789"

    def do_GET(self) -> None:
        sent = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
        type(self).keys.append(sent)
        if self.path == "/health":
            status, body = 200, {"status": "healthy"}
        elif sent == type(self).accepted:
            status, body = 200, {"banks": [], "total": 0, "limit": 1, "offset": 0}
        else:
            status, body = 401, {"detail": "Invalid API key"}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def answering() -> Iterator[str]:
    _Answering.keys = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answering)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_with_every_proxy_variable_on_a_closed_port_loopback_still_answers(
    answering: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's reproduction: HTTP_PROXY et al. set (here to a closed port) used to send
    every request for 127.0.0.1 to the proxy, with the key."""
    for name in PROXY_VARIABLES:
        monkeypatch.setenv(name, CLOSED)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)

    async def listed() -> bool:
        backend = HindsightBackend(answering, api_key=_Answering.accepted)
        try:
            return await backend.bank_exists("pi-coding", timeout=10)
        finally:
            await backend.close()

    assert asyncio.run(listed()) is False  # asked and answered: no such bank
    probe = _health(answering, 5, _Answering.accepted)
    assert probe["healthy"] is True
    assert probe["proxy"]["reason"] == "loopback"


def test_a_remote_server_through_a_closed_proxy_says_so_and_hides_its_credentials(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://someone:pr0xy-pass@127.0.0.1:9")

    async def attempt() -> str:
        backend = HindsightBackend("http://hindsight.team.example:8888", api_key="k" * 20)
        try:
            await backend.bank_exists("pi-coding", timeout=10)
        except BackendUnavailable as error:
            return error.describe()
        finally:
            await backend.close()
        raise AssertionError("reached a server that does not exist")

    said = asyncio.run(attempt())
    assert "through the proxy http://***@127.0.0.1:9 (from HTTP_PROXY)" in said
    assert "NO_PROXY" in said
    assert "pr0xy-pass" not in said and "someone" not in said and "k" * 20 not in said
    probe = _health("http://hindsight.team.example:8888", 5, "k" * 20)
    assert probe["healthy"] is False
    assert probe["proxy"]["description"] == "http://***@127.0.0.1:9 (from HTTP_PROXY)"
    assert "pr0xy-pass" not in json.dumps(probe) and "k" * 20 not in json.dumps(probe)


def test_a_rotated_key_file_is_used_from_the_next_call_without_a_restart(
    answering: str, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    key_file = tmp_path / "team.key"
    key_file.write_text("old-key-0123456789\n")
    key_file.chmod(0o600)
    (state / "config.json").write_text(
        json.dumps(
            {
                "hindsight": {
                    "baseUrl": answering,
                    "apiKey": {"source": "file", "path": str(key_file)},
                }
            }
        )
    )
    loaded = load_config(state, {})
    assert loaded.settings.hindsight.api_key == "old-key-0123456789"
    assert loaded.key_file == key_file and loaded.problems == ()
    key = RotatingKey(state, loaded, {})

    async def session() -> list[str]:
        backend = HindsightBackend(answering, api_key=key)
        outcomes = []
        try:
            try:
                await backend.bank_exists("pi-coding", timeout=10)
            except BackendAuthRejected as error:
                outcomes.append(f"refused: {error}")
            # The team rotates: the file gets the server's key (replaced whole, or rewritten).
            replacement = tmp_path / "team.key.new"
            replacement.write_text(_Answering.accepted + "\n")
            replacement.chmod(0o600)
            replacement.replace(key_file)
            outcomes.append(str(await backend.bank_exists("pi-coding", timeout=10)))
        finally:
            await backend.close()
        return outcomes

    refused, then = asyncio.run(session())
    assert BackendAuthRejected.REFUSED in refused and "old-key" not in refused
    assert then == "False"  # answered: the new key was accepted
    assert _Answering.keys[-2:] == ["old-key-0123456789", _Answering.accepted]


def test_a_key_file_that_others_can_read_or_that_is_empty_is_reported(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    key_file = tmp_path / "team.key"
    config = {"hindsight": {"apiKey": {"source": "file", "path": str(key_file)}}}
    (state / "config.json").write_text(json.dumps(config))
    missing = load_config(state, {})
    assert missing.settings.hindsight.api_key is None
    (problem,) = missing.warnings
    assert "cannot be read" in problem.message and str(key_file) in problem.message
    key_file.write_text("shared-key-0123456789")
    key_file.chmod(0o644)
    loose = load_config(state, {})
    assert loose.settings.hindsight.api_key == "shared-key-0123456789"
    (problem,) = loose.warnings
    assert "can be read by others" in problem.message and "chmod 600" in problem.fix
    assert "shared-key" not in problem.describe()
    key_file.write_text("two keys")
    (problem,) = load_config(state, {}).warnings
    assert "more than one key" in problem.message and "two" not in problem.describe()
    relative = {"hindsight": {"apiKey": {"source": "file", "path": "team.key"}}}
    (state / "config.json").write_text(json.dumps(relative))
    (problem,) = load_config(state, {}).warnings
    assert "absolute path" in problem.message


def test_ca_file_must_be_an_existing_absolute_file_and_a_repository_cannot_set_it(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    ca = tmp_path / "ca.pem"
    ca.write_text("not checked here")
    (state / "config.json").write_text(json.dumps({"hindsight": {"caFile": str(ca)}}))
    assert load_config(state, {}).settings.hindsight.ca_file == str(ca)
    (state / "config.json").write_text(json.dumps({"hindsight": {"caFile": "ca.pem"}}))
    bad = load_config(state, {})
    assert bad.settings.hindsight.ca_file is None
    assert any(p.key == "hindsight.caFile" for p in bad.warnings)
    repo = tmp_path / "repo"
    (repo / ".pi").mkdir(parents=True)
    (repo / ".pi" / "hindsight.json").write_text(json.dumps({"hindsight": {"caFile": str(ca)}}))
    (state / "config.json").write_text("{}")
    from_repo = load_config(state, {}, project_root=repo)
    assert from_repo.settings.hindsight.ca_file is None


def test_an_unusable_ca_file_is_a_clear_error_at_the_first_call(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")

    async def attempt() -> str:
        backend = HindsightBackend("https://127.0.0.1:9", ca_file=str(ca))
        try:
            await backend.health(timeout=5)
        except BackendUnavailable as error:
            return error.describe()
        finally:
            await backend.close()
        raise AssertionError("no error")

    said = asyncio.run(attempt())
    assert f"hindsight.caFile {ca} cannot be used" in said and "caFile" in said


def test_proxy_variables_are_ignored_by_the_session_for_netrc_too(
    answering: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``trust_env`` on, aiohttp would also add ``.netrc`` credentials for the host (and
    then refuse to combine them with our bearer header)."""
    netrc = tmp_path / ".netrc"
    netrc.write_text("machine 127.0.0.1 login someone password netrc-pass\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))

    async def listed() -> bool:
        backend = HindsightBackend(answering, api_key=_Answering.accepted)
        try:
            return await backend.bank_exists("pi-coding", timeout=10)
        finally:
            await backend.close()

    assert asyncio.run(listed()) is False
    assert _Answering.keys[-1] == _Answering.accepted


def test_a_repositorys_claude_code_settings_cannot_choose_the_proxy_or_the_cas(
    tmp_path: Path,
) -> None:
    """Claude Code applies a launch directory's ``.claude/settings.json`` ``env`` to our hooks:
    a proxy (or CA file) chosen there could read a remote server's key. Those variables are
    ours to guard, and part of the daemon's identity."""
    repo = tmp_path / "repo"
    (repo / ".claude").mkdir(parents=True)
    hostile = {"HTTPS_PROXY": "http://evil:1", "no_proxy": "*", "SSL_CERT_FILE": "/evil.pem"}
    (repo / ".claude" / "settings.json").write_text(json.dumps({"env": {**hostile, "X": "1"}}))
    found = {name for name, _ in runtime.repository_set([str(repo)])}
    assert found == set(hostile)
    with pytest.raises(runtime.RepositoryEnvError, match="HTTPS_PROXY"):
        runtime.user_env({**hostile, "CLAUDE_PID": "1"}, str(repo))  # Claude's env unreadable
    state = tmp_path / "state"
    plain = runtime.daemon_key(state, {})
    assert runtime.daemon_key(state, {"HTTPS_PROXY": "http://proxy:1"}) != plain
    assert runtime.daemon_key(state, {"UNRELATED": "1"}) == plain
    # A key exported anew under the name the user config gives reaches a daemon that uses it.
    state.mkdir()
    reference = {"hindsight": {"apiKey": {"source": "env", "name": "TEAM_KEY"}}}
    (state / "config.json").write_text(json.dumps(reference))
    old, new = (runtime.daemon_key(state, {"TEAM_KEY": key}) for key in ("old-key", "new-key"))
    assert old != new and "new-key" in new  # the identity; only its checksum is ever shown
