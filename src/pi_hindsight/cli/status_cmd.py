"""``pi-hindsight status``: memory at a glance for a directory, without starting anything."""

from __future__ import annotations

import asyncio
import json
import os
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import click

from pi_hindsight.app import CLI_HOST, base_url_resolver, build_engine
from pi_hindsight.cli._common import echo_json, json_option, resolve_state_dir, state_dir_option
from pi_hindsight.config import Settings
from pi_hindsight.config.display import basic_auth, display_url, scrub, url_secrets
from pi_hindsight.engine.status import EngineStatus, describe_status
from pi_hindsight.engine.types import SessionInfo
from pi_hindsight.errors import BackendAuthRejected, StateError
from pi_hindsight.launcher.server_record import ServerPaths, load_record
from pi_hindsight.transport import (
    TLS_HINT,
    CaFileError,
    ProxyRoute,
    describe_tls_failure,
    proxy_credentials,
    proxy_route,
    tls_context,
)


def _opener(route: ProxyRoute, ca_file: str | None) -> urllib.request.OpenerDirector:
    """urllib as the client goes: the proxy we chose for this URL (never one for loopback),
    and the CA file's certificates for an https:// server."""
    proxies = {} if route.url is None else {"http": route.url, "https": route.url}
    return urllib.request.build_opener(
        urllib.request.ProxyHandler(proxies),
        urllib.request.HTTPSHandler(context=tls_context(ca_file)),
    )


def _request(base_url: str, path: str, api_key: str | None) -> urllib.request.Request:
    plain, authorization = basic_auth(base_url)  # urllib does not take user:password@ itself
    request = urllib.request.Request(f"{plain.rstrip('/')}{path}")  # noqa: S310 - our URL
    if api_key:  # as the client sends it (it takes the place of a URL's user:password)
        authorization = f"Bearer {api_key}"
    if authorization is not None:
        request.add_header("Authorization", authorization)
    return request


def _key_refused(
    opener: urllib.request.OpenerDirector, base_url: str, api_key: str | None, timeout_s: float
) -> str | None:
    """Why the server refuses the configured key, asking what needs one (``/health`` does not):
    a one-bank listing. None when it is accepted or the answer says nothing about the key."""
    try:
        with opener.open(
            _request(base_url, "/v1/default/banks?limit=1", api_key), timeout=timeout_s
        ):
            return None
    except urllib.error.HTTPError as error:
        if error.code not in (401, 403):
            return None
        sent = "" if api_key else ", none was sent"
        return (
            f"{BackendAuthRejected.REFUSED} (HTTP {error.code}{sent}) — {BackendAuthRejected.FIX}"
        )
    except (urllib.error.URLError, OSError, ValueError):
        return None


def _health(
    base_url: str | None, timeout_s: float, api_key: str | None = None, ca_file: str | None = None
) -> dict[str, Any]:
    """Probe ``/health``, then whether the server accepts the configured key, through the proxy
    the client uses (reported); the URL is reported without its password, the proxy without its
    credentials, and no error text can leak them or the key."""
    if base_url is None:
        return {"url": None, "healthy": False, "problem": "no server configured or recorded"}
    shown = display_url(base_url)
    route = proxy_route(base_url, os.environ)
    found: dict[str, Any] = {"url": shown, "healthy": False, "proxy": route.to_json()}
    secrets = (*url_secrets(base_url), *proxy_credentials(route.url), api_key)
    try:
        opener = _opener(route, ca_file)
        with opener.open(_request(base_url, "/health", api_key), timeout=timeout_s) as response:
            body = json.loads(response.read(65_536) or b"{}")
            healthy = response.status == 200
    except CaFileError as error:
        return {**found, "problem": f"{error} (fix or remove hindsight.caFile)"}
    except (urllib.error.URLError, OSError, ValueError) as error:
        tls = describe_tls_failure(error)
        problem = f"{tls} — {TLS_HINT}" if tls else scrub(str(error), secrets)
        return {**found, "problem": problem}
    refused = _key_refused(opener, base_url, api_key, timeout_s) if healthy else None
    if refused is not None:
        return {**found, "detail": body, "problem": refused}
    return {**found, "healthy": healthy, "detail": body}


async def _engine_status(
    directory: Path, cwd: Path, spend: bool = True
) -> tuple[EngineStatus, tuple[str, ...], Settings]:
    """The status a session started in ``cwd`` would have — the same engine and the same one
    config resolution as the sidecar, but passive: nothing is retained, recorded or sent."""
    engine = build_engine(CLI_HOST, directory, passive=True)
    info = SessionInfo(f"status-{uuid.uuid4()}", cwd, None, has_ui=False, reason="status")
    try:
        await engine.open_session(info)
        await engine.open_stores_for_status()  # outbox health, the held-back share
        return await engine.status(spend=spend), engine.resolution_warnings(), engine.settings
    finally:
        await engine.shutdown(0.0)


def collect_status(
    directory: Path, cwd: Path, *, check_server: bool
) -> tuple[EngineStatus, dict[str, Any]]:
    """The engine's status for ``cwd``, and its JSON with what only this command adds (the
    server's health, checked here; the resolution's warnings)."""
    status, warnings, settings = asyncio.run(_engine_status(directory, cwd, check_server))
    base_url = base_url_resolver(directory)(settings)
    data = {
        **status.to_json(),
        "stateDir": str(directory),
        "cwd": str(cwd),
        "registered": status.enabled,
        "warnings": list(warnings),
        "configProblems": list(status.config.problems),
        "server": _health(
            base_url,
            settings.timeout_ms / 1000,
            settings.hindsight.api_key,
            settings.hindsight.ca_file,
        )
        if check_server
        else {"url": None if base_url is None else display_url(base_url)},
    }
    data["server"]["reranker"] = _reranker(directory, base_url)
    return status, data


def _reranker(directory: Path, base_url: str | None) -> dict[str, Any] | None:
    """The reranker of the server in use, when it is the one ``server start`` recorded here
    (another server's is not known from outside)."""
    try:
        record = load_record(ServerPaths(directory))
    except StateError:
        return None
    if record is None or base_url is None or record.base_url != base_url.rstrip("/"):
        return None
    return None if record.reranker is None else record.reranker.to_json()


@click.command()
@click.option(
    "--cwd",
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    default=".",
    help="Directory a session would start in (default: here).",
)
@click.option("--no-server", is_flag=True, help="Do not contact the server.")
@state_dir_option
@json_option
def status(cwd: Path, no_server: bool, state_dir: Path | None, as_json: bool) -> None:
    """Scope, registration, server health and outbox health for a directory."""
    engine_status, data = collect_status(
        resolve_state_dir(state_dir), cwd.resolve(), check_server=not no_server
    )
    if as_json:
        echo_json(data)
        return
    click.echo(f"directory: {data['cwd']}")
    click.echo(describe_status(engine_status))
    server = data["server"]
    state = "healthy" if server.get("healthy") else f"unavailable ({server.get('problem', '?')})"
    if no_server:
        state = "not checked"
    click.echo(f"server:    {server.get('url') or '-'} — {state}")
    if server.get("proxy") and engine_status.scope is None:  # else describe_status said it
        click.echo(f"proxy:     {server['proxy']['description']}")
    reranker = server.get("reranker")
    if reranker:
        click.echo(f"reranker:  {reranker['provider']}: {reranker['why']}")
    for warning in data["warnings"]:
        click.echo(f"warning:   {warning}")
