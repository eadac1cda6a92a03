"""Benchmark and proof: a team on one keyed Hindsight loses nothing and mixes nothing (issue 20).

``--people`` simulated people (default 20; the last ``--claude`` of them on Claude Code) work at
once against one Hindsight on loopback that this script starts with an API key (the launcher,
``--llm offline``). Each has their own state dir and config, their own User bank
(``bankNaming.userId``), and the team's key in a key file of their own (even-numbered people) or
in their own environment (odd ones). Each runs ``--sessions`` sessions of ``--requests``
requests, alternately in their own repository and in their clone of a repository shared with
others (one per five people): Pi people through a real sidecar each session (``pi-hindsight
serve`` over its stdio, as the Pi shim), Claude Code people through the real hook client and
their daemon. Every Pi person also keeps a personal preference (``hindsight_retain_global``).

Mid-run, two outages: one person's key file is changed to a wrong key until that person has met
the refusal (then put back: the running sessions pick it up), and later the server is stopped
until someone has met the outage, then started again on the same port.

Afterwards every outbox is drained and the invariants are checked from real data
(``_team_checks.py``): every request retained exactly once, nothing of one scope or one person's
User bank delivered to another, every outage visible in status and evidence. Reported: the time
each request waited for its memory (p50/p99; Pi: the ``prepareMemory`` round trip, Claude Code:
the hook's wall time), outside the outages and overall, and retained requests per second. Exits
1 when an invariant fails (a person who could not finish is one), 2 when the run could not
be set up or checked.

    .venv/bin/python bench/team_load.py                       # 20 people x 2 sessions x 3
    .venv/bin/python bench/team_load.py --people 3 --claude 1 --sessions 2 --requests 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import traceback
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from _team_checks import (  # noqa: E402 - after the path set-up (the bench runs as a script)
    Check,
    Window,
    bank_documents,
    evidence,
    exactly_once,
    nothing_crosses,
    outages_show,
)
from _team_drivers import Plan, Sent, claude_session, pi_session, stop_daemon  # noqa: E402
from _team_world import SERVER_KEY_VAR, Ledger, Person, build_people, new_key  # noqa: E402


@dataclass
class Load:
    """The run in progress: what was sent so far, and the outages so far (thread-safe)."""

    planned: int
    deadline: float
    sent: list[Sent] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    done: bool = False  # every person has finished
    tool_waits: list[float] = field(default_factory=list)  # hindsight_retain_global calls
    changed: threading.Condition = field(default_factory=threading.Condition)

    def on_sent(self, one: Sent) -> None:
        with self.changed:
            self.sent.append(one)
            self.changed.notify_all()

    def wait_for(self, predicate: Any, timeout: float) -> bool:
        with self.changed:
            return bool(self.changed.wait_for(predicate, timeout=timeout))

    def met_since(self, start: float, who: str | None = None) -> bool:
        """Whether a request that started after ``start`` failed visibly (live)."""
        return any(
            one.started >= start
            and (who is None or one.person == who)
            and (one.outcome == "backend_unavailable" or (one.host != "pi" and one.notices))
            for one in self.sent
        )


def _person_work(person: Person, options: argparse.Namespace, load: Load, ledger: Ledger) -> None:
    time.sleep(person.index * options.ramp)  # people start one after another, then all work
    try:
        for number in range(options.sessions):
            repo = person.own_repo if number % 2 == 0 else person.shared_repo
            session = (
                str(uuid.uuid4())
                if person.host == "claude-code"
                else f"{person.name}-s{number}-{uuid.uuid4().hex[:6]}"
            )
            plan = Plan(
                person, repo, session, options.requests, options.pause, load.deadline,
                load.on_sent, personal=person.host == "pi" and number == 0,
                on_tool=load.tool_waits.append,
            )  # fmt: skip
            if person.host == "pi":
                pi_session(plan, ledger)
            else:
                claude_session(plan, ledger, person.scopes[repo])
    except Exception:
        load.failures.append(f"{person.name}: {traceback.format_exc()}")


def _coordinate(load: Load, victim: Person, server: ServerControl) -> None:
    """The two outages, each held until someone met it (bounded)."""
    total = load.planned
    try:
        # After the victim's first request (their next ones meet it), held until one has.
        load.wait_for(
            lambda: load.done or any(one.person == victim.name for one in load.sent),
            timeout=max(1.0, load.deadline - time.monotonic()),
        )
        start = time.monotonic()
        victim.write_key(new_key())  # a key the server does not know
        load.wait_for(
            lambda: load.done or load.met_since(start, victim.name),
            timeout=max(1.0, load.deadline - time.monotonic()),
        )
        time.sleep(1.0)  # a while: also the retain worker meets it
        victim.write_key(victim.key)
        load.windows.append(Window("refused key", start, time.monotonic(), victim.name))

        load.wait_for(
            lambda: load.done or len(load.sent) >= total * 0.45,
            timeout=max(1.0, load.deadline - time.monotonic()),
        )
        start = time.monotonic()
        server.stop()
        load.wait_for(lambda: load.done or load.met_since(start), timeout=60)
        server.start()
        load.windows.append(Window("server restart", start, time.monotonic()))
    except Exception:
        load.failures.append(f"coordinator: {traceback.format_exc()}")


class ServerControl:
    """The keyed Hindsight of the run, through the launcher (same port after a restart)."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.port: int | None = None
        self.base_url = ""

    def start(self) -> None:
        from pi_hindsight.launcher import start_server

        info = start_server(
            self.state_dir, llm="offline", port=self.port, api_key_env=SERVER_KEY_VAR
        )
        self.port, self.base_url = info.port, info.base_url

    def stop(self) -> None:
        from pi_hindsight.launcher import stop_server

        stop_server(self.state_dir)

    def remove(self) -> None:
        """The stopped server's files; as root, also its PostgreSQL cluster in the system dir."""
        from pi_hindsight.launcher.postgres import instance_key, system_dir

        if os.geteuid() == 0:
            shutil.rmtree(system_dir() / "instances" / instance_key(self.state_dir), True)
        shutil.rmtree(self.state_dir, ignore_errors=True)


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _figures(values: list[float]) -> dict[str, Any]:
    ms = [v * 1000 for v in values]
    p50, p99 = percentile(ms, 0.5), percentile(ms, 0.99)
    return {
        "n": len(ms),
        "p50_ms": None if p50 is None else round(p50, 1),
        "p99_ms": None if p99 is None else round(p99, 1),
    }


def _drain(people: list[Person], seconds: float) -> dict[str, dict[str, Any]]:
    """Drain every outbox (Claude Code daemons are stopped afterwards); their state after."""

    def one(person: Person) -> tuple[str, dict[str, Any]]:
        try:
            person.cli(
                "outbox", "drain", "--timeout", str(int(max(10, seconds))), timeout=seconds + 120
            )
        except RuntimeError as error:
            print(f"  drain: {error}", file=sys.stderr)
        if person.host == "claude-code":
            stop_daemon(person)
        status = json.loads(person.cli("outbox", "status", "--json"))
        return person.name, status

    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(pool.map(one, people))


def run(options: argparse.Namespace, work: Path) -> dict[str, Any]:
    run_id = uuid.uuid4().hex[:6]
    os.environ[SERVER_KEY_VAR] = key = new_key()
    server = ServerControl(work / "server")
    server.start()
    people: list[Person] = []
    try:
        people = build_people(
            work / "people", server.base_url, key, people=options.people,
            claude=options.claude, run=f"load-{run_id}", bank=f"load-{run_id}",
        )  # fmt: skip
        planned = options.people * options.sessions * options.requests
        load = Load(planned, time.monotonic() + options.timeout * 0.6)
        ledger = Ledger()
        began = time.monotonic()
        workers = [
            threading.Thread(target=_person_work, args=(p, options, load, ledger)) for p in people
        ]
        coordinator = threading.Thread(target=_coordinate, args=(load, people[0], server))
        for thread in (*workers, coordinator):
            thread.start()
        for thread in workers:
            thread.join()
        load_s = time.monotonic() - began
        with load.changed:
            load.done = True
            load.changed.notify_all()
        coordinator.join()
        remaining = max(30.0, options.timeout - (time.monotonic() - began))
        outboxes = _drain(people, remaining)
        retained_s = time.monotonic() - began
        return _report(
            options, server, people, load, ledger, outboxes, load_s, retained_s, f"load-{run_id}"
        )
    finally:
        for person in people:
            if person.host == "claude-code":
                stop_daemon(person)
        server.stop()


def _report(
    options: argparse.Namespace,
    server: ServerControl,
    people: list[Person],
    load: Load,
    ledger: Ledger,
    outboxes: dict[str, dict[str, Any]],
    load_s: float,
    retained_s: float,
    bank: str,
) -> dict[str, Any]:
    key = os.environ[SERVER_KEY_VAR]
    project_docs = bank_documents(server.base_url, key, bank)
    personal = {
        p.name: (p.user_bank, bank_documents(server.base_url, key, p.user_bank)) for p in people
    }
    ledgers = {p.name: evidence(p) for p in people}
    scope_of = {(one.person, one.session): one.scope for one in load.sent}
    once = exactly_once(load.sent, project_docs, personal, outboxes, ledger)
    crosses, with_tokens = nothing_crosses(load.sent, ledgers, scope_of, ledger)
    shown, met = outages_show(load.sent, ledgers, load.windows)
    completed = Check("the run completed", list(load.failures), checked=len(load.sent))
    checks = [once, crosses, shown, completed]
    calm = [one for one in load.sent if not any(w.covers(one) for w in load.windows)]
    retained = once.passed
    return {
        "people": options.people,
        "claude_code_people": options.claude,
        "sessions": options.sessions,
        "requests_per_session": options.requests,
        "pause_s": options.pause,
        "ramp_s": options.ramp,
        "planned": load.planned,
        "sent": len(load.sent),
        "load_s": round(load_s, 1),
        "sent_per_s": round(len(load.sent) / load_s, 2) if load_s else None,
        "until_all_retained_s": round(retained_s, 1),
        "retained_per_s": round(retained / retained_s, 2) if retained_s else None,
        "wait_for_memory": {
            host: {
                "outside_outages": _figures([o.wait_s for o in calm if o.host == host]),
                "all": _figures([o.wait_s for o in load.sent if o.host == host]),
            }
            for host in ("pi", "claude-code")
        },
        "retain_global_wait": _figures(load.tool_waits),
        "recall_ms_inside_sidecar": _figures(
            [o.recall_ms / 1000 for o in calm if o.recall_ms is not None]
        ),
        "outcomes": _count(o.outcome or "(see evidence)" for o in load.sent),
        "outages": {
            w.kind: {"s": round(w.end - w.start, 1), "requests_failed": met.get(w.kind, 0)}
            for w in load.windows
        },
        "delivered_texts_with_tokens": with_tokens,
        "documents_on_server": len(project_docs),
        "invariants": {check.name: check.to_json() for check in checks},
        "ok": all(check.ok for check in checks),
    }


def _count(values: Any) -> dict[str, int]:
    found: dict[str, int] = {}
    for value in values:
        found[value] = found.get(value, 0) + 1
    return found


def _print(report: dict[str, Any]) -> None:
    print(
        f"{report['people']} people ({report['claude_code_people']} on Claude Code) x "
        f"{report['sessions']} sessions x {report['requests_per_session']} requests: "
        f"{report['sent']} of {report['planned']} sent in {report['load_s']} s "
        f"({report['sent_per_s']}/s); all retained after {report['until_all_retained_s']} s "
        f"from the first request: {report['retained_per_s']} retained requests/s"
    )
    for host, figures in report["wait_for_memory"].items():
        calm, every = figures["outside_outages"], figures["all"]
        print(
            f"  {host:<11} wait for memory p50 {calm['p50_ms']} ms, p99 {calm['p99_ms']} ms "
            f"(n={calm['n']}, outside outages); all: p50 {every['p50_ms']}, p99 {every['p99_ms']}"
        )
    tool = report["retain_global_wait"]
    print(
        f"  hindsight_retain_global wait p50 {tool['p50_ms']} ms, p99 {tool['p99_ms']} ms "
        f"(n={tool['n']}; the shim waits timeoutMs + 2 s, 12 s by default)"
    )
    recall = report["recall_ms_inside_sidecar"]
    print(f"  recall inside the sidecar: p50 {recall['p50_ms']} ms, p99 {recall['p99_ms']} ms")
    print(f"  outcomes: {report['outcomes']}; outages: {report['outages']}")
    print(
        f"  {report['documents_on_server']} session documents on the server; "
        f"{report['delivered_texts_with_tokens']} delivered texts held tokens"
    )
    for name, check in report["invariants"].items():
        verdict = "holds" if check["ok"] else "FAILS"
        print(f"  [{verdict}] {name} ({check['checked']} checked)")
        for problem in check["problems"]:
            print(f"      - {problem}")
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    print(f"  load average: {load} on {os.cpu_count()} cores")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--people", type=int, default=20)
    parser.add_argument(
        "--claude", type=int, help="how many of them use Claude Code (default: a quarter)"
    )
    parser.add_argument("--sessions", type=int, default=2, help="sessions per person")
    parser.add_argument("--requests", type=int, default=3, help="requests per session")
    parser.add_argument(
        "--pause", type=float, default=0.5, help="seconds between a person's requests"
    )
    parser.add_argument(
        "--ramp", type=float, default=1.0, help="seconds between one person's start and the next"
    )
    parser.add_argument("--timeout", type=float, default=1800, help="bound of the whole run, s")
    parser.add_argument(
        "--keep", action="store_true", help="keep the people's state dirs and the server's files"
    )
    parser.add_argument("--json", type=Path, help="also write the report here")
    options = parser.parse_args()
    if options.claude is None:
        options.claude = options.people // 4
    if (
        options.people < 2
        or not 0 <= options.claude < options.people
        or options.sessions < 1
        or options.requests < 1
    ):
        parser.error("need 2+ people (one of them on Pi), 1+ sessions and 1+ requests")
    work = Path(tempfile.mkdtemp(prefix="pi-hindsight-team-load-"))
    try:
        report = run(options, work)
    except Exception:
        traceback.print_exc()
        return 2
    finally:
        if options.keep:
            print(f"kept: {work}", file=sys.stderr)
        else:
            ServerControl(work / "server").remove()
            shutil.rmtree(work, ignore_errors=True)
    _print(report)
    if options.json:
        options.json.write_text(json.dumps(report, indent=2))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
