"""Issue 9: a bad config file, repository file or byte never breaks loading, never leaks a secret,
and says once what is wrong and how to fix it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_hindsight.cli.main import cli
from pi_hindsight.config import load_config
from tests.support.hostile_files import BENIGN, HOSTILE

pytestmark = pytest.mark.timeout(120)  # a FIFO read without O_NONBLOCK would hang: fail instead


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / ".pi").mkdir(parents=True, exist_ok=True)
    return repo


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_hostile_user_config_falls_back_to_defaults_with_one_problem(
    kind: str, tmp_path: Path
) -> None:
    """Issue 9: a non-UTF-8, deeply nested, special or huge config.json raised a traceback."""
    make, fragment = HOSTILE[kind]
    state = tmp_path / "state"
    state.mkdir()
    make(state / "config.json")
    loaded = load_config(state, env={})
    assert loaded.settings.enabled is True
    assert loaded.settings.recall.budget == "mid"
    (problem,) = loaded.warnings
    assert problem.source == str(state / "config.json")
    assert fragment in problem.message, problem.describe()
    assert problem.fix  # every problem says how to fix it
    assert len(loaded.notices()) == 1


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_hostile_repository_file_is_ignored_with_one_notice(kind: str, tmp_path: Path) -> None:
    """Issue 9: a repository file that is /dev/zero, a FIFO, nested 5,000 levels or not UTF-8
    turned memory off (initialize failed); now its keys are ignored, said once."""
    make, fragment = HOSTILE[kind]
    repo = _repo(tmp_path)
    make(repo / ".pi" / "hindsight.json")
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "config.json").write_text('{"recall": {"maxTokens": 700}}')
    loaded = load_config(tmp_path / "state", env={}, project_root=repo)
    assert loaded.settings.recall.max_tokens == 700  # the user's own settings still apply
    assert loaded.settings.recall.budget == "mid"
    (notice,) = loaded.notices()
    assert str(repo / ".pi" / "hindsight.json") in notice
    assert fragment in notice


@pytest.mark.parametrize("kind", sorted(BENIGN))
def test_a_bom_or_a_surrogate_pair_is_read_as_meant(kind: str, tmp_path: Path) -> None:
    (tmp_path / "config.json").write_bytes(BENIGN[kind])
    loaded = load_config(tmp_path, env={})
    assert loaded.problems == ()
    assert loaded.settings.recall.budget == "low"


def test_a_lone_surrogate_drops_only_its_key_and_nothing_downstream_breaks(
    tmp_path: Path,
) -> None:
    """json accepts "\\ud800"; printed or written as UTF-8 it raised UnicodeEncodeError."""
    (tmp_path / "config.json").write_text(
        '{"banks": {"project": {"bankId": "x\\ud800"}}, "\\udc00": 1, "timeoutMs": 3000}'
    )
    loaded = load_config(tmp_path, env={})
    assert loaded.settings.banks.project.bank_id == "pi-coding"
    assert loaded.settings.timeout_ms == 3000
    keys = {problem.key for problem in loaded.warnings}
    assert keys == {"banks.project.bankId", "\\udc00"}
    for problem in loaded.problems:
        problem.describe().encode("utf-8")  # printable as UTF-8


def test_a_repository_file_with_many_keys_gives_one_notice_listing_some(tmp_path: Path) -> None:
    """Issue 9: a hostile repository file produced 23 warnings in one session (one per key)."""
    repo = _repo(tmp_path)
    hostile = {"enabled": True, "hindsight": {"baseUrl": "http://evil.example"}}
    hostile.update({f"key{number}": number for number in range(200)})
    (repo / ".pi" / "hindsight.json").write_text(json.dumps(hostile))
    loaded = load_config(tmp_path / "state", env={}, project_root=repo)
    (notice,) = loaded.notices()
    assert "202 setting(s) ignored" in notice and "enabled" in notice
    # status and validate still list them, bounded.
    listed = [p for p in loaded.problems if p.source == str(repo / ".pi" / "hindsight.json")]
    assert len(listed) == 51 and listed[-1].key == "(more)" and listed[-1].count == 152


def test_terminal_escapes_in_a_repository_file_are_shown_escaped(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / ".pi" / "hindsight.json").write_text(
        json.dumps({"\x1b[2Jboom": 1, "recall": {"maxTokens": "\x1b]0;owned\x07"}})
    )
    loaded = load_config(tmp_path / "state", env={}, project_root=repo)
    text = "\n".join([*loaded.notices(), *(p.describe() for p in loaded.problems)])
    assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b[2Jboom" in text


def test_booleans_are_strict_and_base_url_must_be_http_with_a_host(tmp_path: Path) -> None:
    """Issue 9: `config validate` accepted "enabled": "yes" and baseUrl "not a url"."""
    for value in ("not a url", "ftp://host/x", "http://", "file:///etc/passwd", "http://h:99999"):
        (tmp_path / "config.json").write_text(
            json.dumps({"enabled": "yes", "hindsight": {"baseUrl": value}})
        )
        loaded = load_config(tmp_path, env={})
        assert loaded.settings.enabled is True and loaded.settings.hindsight.base_url is None
        problems = {p.key: p for p in loaded.warnings}
        assert "true or false" in problems["enabled"].fix
        assert "http:// or https:// URL with a host" in problems["hindsight.baseUrl"].message
    (tmp_path / "config.json").write_text(
        json.dumps({"enabled": False, "hindsight": {"baseUrl": "https://hs.example:8443/api"}})
    )
    loaded = load_config(tmp_path, env={})
    assert loaded.problems == ()
    assert loaded.settings.enabled is False
    assert loaded.settings.hindsight.base_url == "https://hs.example:8443/api"


@pytest.mark.parametrize(("word", "expected"), [("false", False), ("0", False), ("TRUE", True)])
def test_the_enabled_variable_takes_true_or_false(
    word: str, expected: bool, tmp_path: Path
) -> None:
    loaded = load_config(tmp_path, env={"PI_HINDSIGHT_ENABLED": word})
    assert loaded.problems == () and loaded.settings.enabled is expected


def test_an_unknown_word_in_the_enabled_variable_is_a_problem(tmp_path: Path) -> None:
    loaded = load_config(tmp_path, env={"PI_HINDSIGHT_ENABLED": "maybe"})
    (problem,) = loaded.problems
    assert problem.source == "PI_HINDSIGHT_ENABLED" and loaded.settings.enabled is True


def test_comments_in_the_repository_file_suggest_jsonc_and_jsonc_is_read(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / ".pi" / "hindsight.json").write_text('{\n  /* why */ "recall": {"budget": "low"}}')
    loaded = load_config(tmp_path / "state", env={}, project_root=repo)
    (problem,) = loaded.warnings
    assert "line 2, column 3" in problem.message and "hindsight.jsonc" in problem.fix
    (repo / ".pi" / "hindsight.json").rename(repo / ".pi" / "hindsight.jsonc")
    loaded = load_config(tmp_path / "state", env={}, project_root=repo)
    assert not loaded.warnings and loaded.settings.recall.budget == "low"


def test_a_deep_or_large_jsonc_file_is_refused_before_json5_sees_it(tmp_path: Path) -> None:
    """json5 is pure Python: it recursed past ~44 levels and took ~1 s per 16 KB of tokens."""
    repo = _repo(tmp_path)
    jsonc = repo / ".pi" / "hindsight.jsonc"
    jsonc.write_text("// c\n" + "[" * 5_000 + "]" * 5_000)
    loaded = load_config(tmp_path / "state", env={}, project_root=repo)
    assert "nested more than 32" in loaded.notices()[0]
    jsonc.write_text("[" + ",".join(["1"] * 20_000) + "]")
    loaded = load_config(tmp_path / "state", env={}, project_root=repo)
    assert "larger than 16 KB" in loaded.notices()[0]


# --- secrets ------------------------------------------------------------------------------

SECRET = "hunter2-s3cr3t"


def _run(*args: str) -> Result:
    result = CliRunner().invoke(cli, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output
    return result


def test_a_wrongly_typed_api_key_is_reported_by_type_never_by_value(
    isolated_dirs: Path, tmp_path: Path
) -> None:
    """Issue 9: an apiKey of the wrong type was echoed in validate/status/notices."""
    isolated_dirs.mkdir(parents=True)
    for value in ([SECRET], 12345678, {"source": "vault", "name": SECRET}, {"k": SECRET}):
        (isolated_dirs / "config.json").write_text(json.dumps({"hindsight": {"apiKey": value}}))
        loaded = load_config(isolated_dirs)
        shown = " ".join([*loaded.notices(), *(p.describe() for p in loaded.problems)])
        assert SECRET not in shown and "12345678" not in shown
        assert loaded.warnings and "apiKey" in shown
        for args in (["config", "validate"], ["config", "validate", "--json"], ["config", "show"]):
            assert SECRET not in _run(*args).output
            assert "12345678" not in _run(*args).output


def test_a_password_in_the_base_url_is_never_shown(isolated_dirs: Path, tmp_path: Path) -> None:
    """Issue 9: a baseUrl with user:password@ was printed in clear by `status`."""
    isolated_dirs.mkdir(parents=True)
    url = f"http://me:{SECRET}@127.0.0.1:9/hs?token={SECRET}x"
    (isolated_dirs / "config.json").write_text(
        json.dumps({"hindsight": {"baseUrl": url, "apiKey": SECRET}})
    )
    outputs = [
        _run("status", "--cwd", str(tmp_path)).output,
        _run("status", "--cwd", str(tmp_path), "--json").output,
        _run("status", "--cwd", str(tmp_path), "--no-server", "--json").output,
        _run("config", "show").output,
        _run("config", "show", "--json").output,
        _run("config", "validate").output,
    ]
    for output in outputs:
        assert SECRET not in output
    status = json.loads(outputs[1])
    assert status["server"]["url"] == "http://me:***@127.0.0.1:9/hs?token=***"
    assert not status["server"]["healthy"]
    # A wrong value of the URL is reported without its password too.
    (isolated_dirs / "config.json").write_text(
        json.dumps({"hindsight": {"baseUrl": f"ftp://me:{SECRET}@host/"}})
    )
    output = _run("config", "validate").output
    assert SECRET not in output and "ftp://me:***@host/" in output


def test_the_api_key_from_the_environment_is_never_shown(
    isolated_dirs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HINDSIGHT_API_KEY", SECRET)
    monkeypatch.setenv("HINDSIGHT_BASE_URL", f"http://u:{SECRET}@127.0.0.1:9")
    for args in (
        ["status", "--cwd", str(tmp_path), "--json"],
        ["status", "--cwd", str(tmp_path)],
        ["config", "show", "--json"],
        ["config", "validate", "--json"],
    ):
        assert SECRET not in _run(*args).output


# --- the CLI on every hostile config ----------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_config_and_status_commands_report_a_hostile_config_cleanly(
    kind: str, isolated_dirs: Path, tmp_path: Path
) -> None:
    """Issue 9: `config validate`, `config show` and `status` printed a traceback."""
    make, fragment = HOSTILE[kind]
    isolated_dirs.mkdir(parents=True)
    make(isolated_dirs / "config.json")
    repo = _repo(tmp_path)
    make(repo / ".pi" / "hindsight.json")
    validate = _run("config", "validate", "--cwd", str(repo))
    assert validate.exit_code == 1 and fragment in validate.output
    assert _run("config", "validate", "--json").exit_code == 1
    assert fragment in _run("config", "show", "--cwd", str(repo)).output
    shown = json.loads(_run("config", "show", "--json").output)
    assert shown["settings"]["recall"]["budget"] == "mid"
    status = _run("status", "--cwd", str(repo), "--no-server")
    assert status.exit_code == 0 and fragment in status.output
    data = json.loads(_run("status", "--cwd", str(repo), "--no-server", "--json").output)
    assert len(data["configProblems"]) == 2  # the user's file and the repository's, once each


# --- properties ---------------------------------------------------------------------------

_json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                ["recall", "maxTokens", "budget", "enabled", "hindsight", "x", "\ud800"]
            ),
            children,
            max_size=4,
        )
    ),
    max_leaves=20,
)
_file_bytes = st.binary(max_size=300) | _json_like.map(
    lambda value: json.dumps({"recall": value, "enabled": value}).encode()
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(user=_file_bytes, project=_file_bytes)
def test_any_bytes_as_config_or_repository_file_load_to_settings_and_problems(
    tmp_path: Path, user: bytes, project: bytes
) -> None:
    """Property (issue 9): load_config never raises, whatever the files hold, and every
    problem prints as UTF-8."""
    state, repo = tmp_path / "state", tmp_path / "repo"
    (repo / ".pi").mkdir(parents=True, exist_ok=True)
    state.mkdir(exist_ok=True)
    (state / "config.json").write_bytes(user)
    (repo / ".pi" / "hindsight.json").write_bytes(project)
    loaded = load_config(state, env={}, project_root=repo)
    assert loaded.settings is not None
    for text in [*loaded.notices(), *(problem.describe() for problem in loaded.problems)]:
        text.encode("utf-8")
    assert sum(1 for notice in loaded.notices() if str(repo) in notice) <= 1


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(user=_file_bytes)
def test_any_bytes_as_config_never_make_the_cli_print_a_traceback(
    isolated_dirs: Path, user: bytes
) -> None:
    """Property (issue 9): the CLI reports any config.json cleanly."""
    isolated_dirs.mkdir(parents=True, exist_ok=True)
    (isolated_dirs / "config.json").write_bytes(user)
    for args in (
        ["config", "validate", "--json"],
        ["config", "show"],
        ["status", "--no-server", "--json", "--cwd", str(isolated_dirs.parent)],
    ):
        result: Any = _run(*args)
        assert result.exit_code in (0, 1)
