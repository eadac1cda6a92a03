"""A team's shared Hindsight with an API key (issue 10, item 4), below the real server: the
launcher's access rules, the boundary's 401/403 translation (through the real client, against a
local server that refuses), and the health notices. The real server with auth on runs in
tests/integration/test_shared_server.py."""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_hindsight.backend.hindsight import HindsightBackend
from pi_hindsight.cli.main import cli
from pi_hindsight.cli.status_cmd import _health
from pi_hindsight.engine.connection import HindsightConnection, ServerAccess
from pi_hindsight.errors import (
    BackendAuthRejected,
    BackendRejected,
    BackendUnavailable,
    CorruptStateError,
    LauncherError,
)
from pi_hindsight.launcher import access, server_control
from pi_hindsight.launcher import api_process as hs
from pi_hindsight.launcher.server_record import (
    ServerAuth,
    ServerPaths,
    ServerRecord,
    load_record,
    save_record,
)

KEY = "team-0123456789abcdefghij"


class _Refusing(http.server.BaseHTTPRequestHandler):
    """Hindsight with a key: ``/health`` for anyone, everything else only with ``KEY``. Its
    refusals echo the Authorization header back, as a careless proxy might."""

    status_for_refusal = 401

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        sent = self.headers.get("Authorization") or ""
        body: dict[str, object]
        if self.path == "/health":
            status, body = 200, {"status": "healthy"}
        elif self.path.startswith("/v1/default/banks/bad-request"):
            status, body = 400, {"detail": "bad request"}
        elif sent == f"Bearer {KEY}":
            status, body = 200, {"banks": [], "total": 0, "limit": 1, "offset": 0}
        else:
            status, body = self.status_for_refusal, {"detail": f"Invalid API key: {sent!r}"}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

    def log_message(self, format: str, *args: object) -> None:
        return


class _Forbidding(_Refusing):
    status_for_refusal = 403


def _serve(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def keyed_server() -> Iterator[str]:
    yield from _serve(_Refusing)


@pytest.fixture
def forbidding_server() -> Iterator[str]:
    yield from _serve(_Forbidding)


def _bank_lookup(base_url: str, api_key: str | None) -> BaseException | None:
    async def look() -> BaseException | None:
        backend = HindsightBackend(base_url, api_key=api_key)
        try:
            await backend.bank_exists("team-bank", timeout=5)
        except Exception as error:
            return error
        finally:
            await backend.close()
        return None

    return asyncio.run(look())


# ---------------------------------------------------------------- the boundary


@pytest.mark.parametrize("sent", [None, "team-wrong-key-0123456789"])
def test_a_refused_key_is_its_own_error_with_the_fix_and_never_quotes_the_key(
    keyed_server: str, sent: str | None
) -> None:
    """Issue 10: a 401 was a plain ``BackendRejected`` ("HTTP 401 Invalid API key") — not
    retried, dead-lettered, and a server echoing the header put the key in the error text."""
    error = _bank_lookup(keyed_server, sent)
    assert isinstance(error, BackendAuthRejected) and error.status == 401
    assert not isinstance(error, BackendRejected)  # not the request's fault: retried later
    text = error.describe()
    assert BackendAuthRejected.REFUSED in text and BackendAuthRejected.FIX in text
    assert ("none was sent" in text) is (sent is None)
    if sent is not None:
        assert sent not in text


def test_403_is_a_refused_key_too_and_the_right_key_passes(forbidding_server: str) -> None:
    error = _bank_lookup(forbidding_server, "team-wrong-key-0123456789")
    assert isinstance(error, BackendAuthRejected) and error.status == 403
    assert _bank_lookup(forbidding_server, KEY) is None


def test_other_client_errors_stay_rejections(keyed_server: str) -> None:
    async def bad() -> BaseException | None:
        backend = HindsightBackend(keyed_server, api_key=KEY)
        try:
            await backend.bank_config("bad-request", timeout=5)
        except Exception as error:
            return error
        finally:
            await backend.close()
        return None

    error = asyncio.run(bad())
    assert type(error) is BackendRejected and error.status == 400


def test_the_status_probe_asks_with_the_configured_key(keyed_server: str) -> None:
    """``/health`` answers without a key: the probe must also ask something that needs one."""
    for sent in (None, "team-wrong-key-0123456789"):
        probe = _health(keyed_server, 5, sent)
        assert probe["healthy"] is False
        assert BackendAuthRejected.REFUSED in probe["problem"]
        assert BackendAuthRejected.FIX in probe["problem"]
        assert sent is None or sent not in json.dumps(probe)
    assert _health(keyed_server, 5, KEY)["healthy"] is True


# ---------------------------------------------------------------- health notices


def test_a_refused_key_is_noticed_once_per_change_and_apart_from_an_outage() -> None:
    async def never(access: ServerAccess) -> HindsightBackend:
        raise AssertionError("not used")

    connection = HindsightConnection(never, lambda settings: None)
    refused = BackendAuthRejected(f"recall failed: {BackendAuthRejected.REFUSED}", status=401)
    down = BackendUnavailable("cannot reach Hindsight")
    (first,) = connection.note(refused)
    assert first.level == "warning" and BackendAuthRejected.FIX in first.message
    assert connection.note(refused) == ()
    (outage,) = connection.note(down)  # another kind of trouble: said again
    assert "cannot reach" in outage.message
    assert connection.note(down) == ()
    assert len(connection.note(refused)) == 1
    (back,) = connection.note(None)
    assert back.level == "info"


# ---------------------------------------------------------------- the launcher's access rules


def test_loopback_unless_an_address_is_given_and_a_network_address_needs_a_key() -> None:
    assert access.bind_host(None) == "127.0.0.1"
    assert access.bind_host("localhost") == "127.0.0.1"
    assert access.bind_host("[::1]") == "::1"
    assert access.connect_host("0.0.0.0") == "127.0.0.1"
    assert access.connect_host("::") == "::1"
    assert access.exposure_warning("127.0.0.1", 1) is None
    warning = access.exposure_warning("0.0.0.0", 8888)
    assert warning is not None and "every network interface" in warning and "TLS" in warning
    with pytest.raises(LauncherError, match="not an IP address"):
        access.bind_host("my laptop")
    with pytest.raises(LauncherError, match="without an API key") as caught:
        access.check_exposure("0.0.0.0", None)
    assert "--api-key-env" in (caught.value.hint or "")
    access.check_exposure("0.0.0.0", "TEAM_KEY")
    access.check_exposure("127.0.0.1", None)


def _rotated(key: str) -> str:
    """The same length and the same kinds of characters, other content."""
    return "".join(chr(33 + (ord(c) - 33 + 47) % 94) if "!" <= c <= "~" else c for c in key)


def _refusal(key: str) -> str | None:
    try:
        access.team_key({"TEAM_KEY": key}, "TEAM_KEY")
    except LauncherError as error:
        return error.describe()
    return None


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=0, max_size=40))
def test_a_bad_key_is_refused_without_quoting_it(key: str) -> None:
    """Whatever is wrong with a key, the message depends on what is wrong, never on the key's
    content (so it cannot quote it), and names the variable."""
    message = _refusal(key)
    if message is None:
        assert len(key) >= access.MIN_KEY_CHARS and key.isascii() and key.isprintable()
        assert not any(c.isspace() for c in key)
        return
    assert "TEAM_KEY" in message
    assert _refusal(_rotated(key)) == message


def test_the_key_variable_must_be_a_name_and_set() -> None:
    with pytest.raises(LauncherError, match="takes an environment variable name") as caught:
        access.team_key({}, "my secret key")
    assert "secret" not in str(caught.value)  # what was given may be the key itself
    with pytest.raises(LauncherError, match="TEAM_KEY is not set"):
        access.team_key({}, "TEAM_KEY")


def test_the_tenant_extension_comes_only_from_the_launcher() -> None:
    """A caller's own HINDSIGHT_API_TENANT_* cannot switch a keyless server's auth (or plant a
    key); with a key, Hindsight's built-in API-key extension is configured."""
    environ = {
        "HINDSIGHT_API_TENANT_EXTENSION": "evil.module:Open",
        "HINDSIGHT_API_TENANT_API_KEY": "planted",
    }
    common = {"environ": environ, "mode": "mock", "port": 1, "database_url": "postgresql://x"}
    keyless = hs.server_env(**common, standin_url=None)  # type: ignore[arg-type]
    assert not any(name.startswith("HINDSIGHT_API_TENANT_") for name in keyless)
    keyed = hs.server_env(**common, standin_url=None, host="0.0.0.0", api_key=KEY)  # type: ignore[arg-type]
    assert keyed["HINDSIGHT_API_TENANT_EXTENSION"] == access.TENANT_EXTENSION
    assert keyed["HINDSIGHT_API_TENANT_API_KEY"] == KEY
    assert keyed["HINDSIGHT_API_HOST"] == "0.0.0.0"


def _record(state: Path, host: str, port: int, auth: ServerAuth | None = None) -> ServerRecord:
    return ServerRecord(
        state_dir=state,
        llm="offline",
        started_at="now",
        phase="running",
        host=host,
        port=port,
        auth=auth,
    )


def test_the_record_keeps_the_variables_name_and_reads_old_records(tmp_path: Path) -> None:
    paths = ServerPaths(tmp_path)
    paths.ensure()
    record = ServerRecord(
        state_dir=tmp_path,
        llm="offline",
        started_at="now",
        phase="running",
        host="0.0.0.0",
        port=4321,
        auth=ServerAuth(api_key_env="TEAM_KEY"),
    )
    save_record(paths, record)
    assert record.base_url == "http://127.0.0.1:4321"  # reached through loopback
    assert json.loads(paths.record.read_text())["auth"] == {"api_key_env": "TEAM_KEY"}
    assert load_record(paths) == record
    old = record.to_json()
    del old["auth"]  # written before team servers existed
    paths.record.write_text(json.dumps(old))
    loaded = load_record(paths)
    assert loaded is not None and loaded.api_key_env is None
    old["auth"] = {"api_key_env": "not a name"}
    paths.record.write_text(json.dumps(old))
    with pytest.raises(CorruptStateError):
        load_record(paths)
    v6 = _record(tmp_path, "::", 9)
    assert v6.base_url == "http://[::1]:9"


def test_a_running_server_is_reused_only_with_the_access_it_was_asked_for(tmp_path: Path) -> None:
    keyless = _record(tmp_path, "127.0.0.1", 1)
    keyed = _record(tmp_path, "127.0.0.1", 1, auth=ServerAuth(api_key_env="K"))
    with pytest.raises(LauncherError, match="without an API key"):
        server_control._check_reused_auth(keyless, "K")
    with pytest.raises(LauncherError, match="with an API key") as caught:
        server_control._check_reused_auth(keyed, None)
    assert "--api-key-env K" in (caught.value.hint or "")
    server_control._check_reused_auth(keyless, None)


def test_key_checks_against_a_keyed_server(keyed_server: str) -> None:
    assert access.key_accepted(keyed_server, KEY) is True
    assert access.key_accepted(keyed_server, None) is False
    assert access.key_accepted(keyed_server, "team-wrong-key-0123456789") is False
    assert access.check_key(keyed_server, {"K": KEY}, "K") == "accepted"
    assert access.check_key(keyed_server, {"K": "team-wrong-key-0123456789"}, "K") == "refused"
    assert access.check_key(keyed_server, {}, "K") == "unset"
    assert access.key_accepted("http://127.0.0.1:9", KEY) is None  # nothing listens there


def test_cli_refuses_unsafe_starts_before_anything_runs(tmp_path: Path) -> None:
    runner = CliRunner(env={"TEAM_KEY": "short", "UNSET_KEY": None, "UNSET_DB": None})
    cases = {
        ("--host", "0.0.0.0"): "refusing to listen on 0.0.0.0 without an API key",
        ("--api-key-env", "UNSET_KEY"): "UNSET_KEY is not set",
        ("--api-key-env", "TEAM_KEY"): "needs at least 16",
        ("--api-key-env", "TEAM_KEY=abc"): "takes an environment variable name",
        ("--host", "somewhere", "--api-key-env", "TEAM_KEY"): "not an IP address",
        ("--database-url", "postgresql://u:short@h/d"): "not taken on the command line",
        ("--database-url-env", "UNSET_DB"): "UNSET_DB is not set",
        ("--database-url-env", "postgresql://u:short@h/d"): "takes an environment variable name",
        ("--database-url-file", str(tmp_path / "absent.url")): "cannot be read",
    }
    for args, message in cases.items():
        result = runner.invoke(
            cli, ["server", "start", "--llm", "offline", "--state-dir", str(tmp_path), *args]
        )
        assert result.exit_code == 1, result.output
        assert message in result.output and "hint:" in result.output
        assert "Traceback" not in result.output and "short" not in result.output
    assert not (tmp_path / "server").exists()  # nothing started, nothing recorded


def test_an_address_this_machine_does_not_have_is_refused_clearly(tmp_path: Path) -> None:
    runner = CliRunner(env={"TEAM_KEY": KEY})
    result = runner.invoke(
        cli,
        [
            "server",
            "start",
            "--llm",
            "offline",
            "--state-dir",
            str(tmp_path),
            "--host",
            "203.0.113.7",  # TEST-NET-3: never an address of this machine
            "--api-key-env",
            "TEAM_KEY",
        ],
    )
    assert result.exit_code == 1, result.output
    assert "cannot listen on 203.0.113.7" in result.output and "hint:" in result.output
    assert "Traceback" not in result.output and KEY not in result.output
    assert not (tmp_path / "server" / "server.json").exists()
