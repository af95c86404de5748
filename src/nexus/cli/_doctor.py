"""``nexus doctor``: check what nexus needs, one line per check, each saying what to fix.

Secrets are never printed: keys are reported as set or not set, with where they come from.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from nexus import __version__
from nexus._dataclass import dataclass

if TYPE_CHECKING:
    from nexus.config import NexusConfig

Status = Literal["ok", "warn", "fail"]


@dataclass(slots=True)
class Check:
    """One line of the report."""

    status: Status
    name: str
    detail: str


def doctor_command(args: argparse.Namespace) -> int:
    """Print the report; exit 0 if all is well, 1 if something fails, 2 if the config is invalid."""
    from nexus.config import config_path, load_config
    from nexus.errors import ConfigError

    env = os.environ
    checks: list[Check] = []
    file = Path(args.config).expanduser() if args.config else config_path(env)
    try:
        config = load_config(args.config, env)
    except ConfigError as exc:
        checks.append(Check("fail", "config", f"{file} is invalid:\n{_indent(str(exc))}"))
        _print(checks)
        return 2
    if config.source is None:
        checks.append(Check("ok", "config", f"{file} not found: using defaults and the environment"))
    else:
        checks.append(Check("ok", "config", f"{config.source} (valid)"))
    checks += _key_checks(config, env)
    checks.append(_model_check(config, env))
    checks += _broker_checks(config)
    checks += _adapter_checks(config, env)
    if config.database_url is not None:
        checks.append(_postgres_check(config.database_url))
    else:
        checks.append(_database_check(config.database_path))
    checks.append(_workspace_check(config.workspace_path))
    checks.append(_local_check(config))
    _print(checks)
    return 1 if any(check.status == "fail" for check in checks) else 0


def _print(checks: list[Check]) -> None:
    print(f"nexus {__version__} (Python {sys.version.split()[0]})")
    for check in checks:
        print(f"[{check.status:<4}] {check.name:<10} {check.detail}")


def _indent(text: str) -> str:
    return "\n".join(f"                  {line}" for line in text.splitlines())


def _keyless(provider: str, base_url: str | None) -> bool:
    """A server on this machine needs no key: ``nexus run`` calls it without one (``model_problem``), so
    the doctor must not fail what a run does."""
    from nexus.llm import key_required, resolve_base_url

    return not key_required(provider, resolve_base_url(provider, base_url or "") or "")


def _key_checks(config: NexusConfig, env: Mapping[str, str]) -> list[Check]:
    from nexus.config import DEFAULT_MODELS, key_env_vars, provider_settings
    from nexus.errors import ConfigError
    from nexus.llm import redact

    found = []
    for provider in DEFAULT_MODELS:
        for var in key_env_vars(provider):
            if env.get(var):
                found.append(f"{var} set")
    known = ", ".join(found) if found else "no provider key in the environment (ANTHROPIC_API_KEY, OPENAI_API_KEY…)"
    checks = [Check("ok" if found else "warn", "env keys", known)]
    for name in config.providers:
        try:
            settings = provider_settings(config, name, env)
        except ConfigError as exc:
            checks.append(Check("fail", "provider", f"{name}: {exc}"))
            continue
        profiles = [f"{p.name}: set ({p.source})" for p in settings.profiles]
        status: Status
        if settings.keyless:
            detail, status = "no key needed", "ok"
        elif not profiles and _keyless(name, settings.base_url):
            detail, status = "no key needed (a server on this machine)", "ok"
        elif not profiles:
            detail, status = f"no key: add api_key to [providers.{name}] or set {key_env_vars(name)[0]}", "warn"
        else:
            detail, status = "; ".join(profiles), "ok" if settings.has_key else "warn"
        where = f" at {redact(settings.base_url)}" if settings.base_url else ""  # a gateway may take a key in it
        checks.append(Check(status, "provider", f"{name} ({settings.api}{where}): {detail}"))
    return checks


def _model_check(config: NexusConfig, env: Mapping[str, str]) -> Check:
    from nexus.config import key_env_vars, local_model_status, provider_settings, resolve_default_model
    from nexus.errors import ConfigError

    try:
        choice = resolve_default_model(config, env)
        settings = provider_settings(config, choice.provider, env)
        usable = settings.has_key or _keyless(choice.provider, settings.base_url)
    except ConfigError as exc:
        return Check("fail", "model", f"none usable:\n{_indent(str(exc))}")
    fallbacks = f"; fallbacks: {', '.join(config.fallbacks)}" if config.fallbacks else ""
    detail = f"{choice.ref} ({choice.reason}){fallbacks}"
    if choice.provider == "local":
        problem = local_model_status(config).problem
        if problem:
            return Check("fail", "model", f"{detail}\n{_indent('but ' + problem)}")
    elif not usable:
        hint = f"but no key for {choice.provider!r}: set {key_env_vars(choice.provider)[0]} or its auth profiles"
        return Check("fail", "model", f"{detail}\n{_indent(hint)}")
    return Check("ok", "model", detail)


def _broker_checks(config: NexusConfig) -> list[Check]:
    """What every broker command (and every run, for the models) refuses: the doctor fails on it too.

    ``default_model``/``fallbacks`` no run could reach (an unknown provider), and the ``[agents]``
    tables' problems (an unknown model or tool, a shared or unaddressable session).
    """
    try:
        from nexus.broker import agent_problems, model_ref_problems
    except ImportError:  # a build without the broker
        return []
    checks = [Check("fail", "model", f"not reachable:\n{_indent(problem)}") for problem in model_ref_problems(config)]
    agents, problems = agent_problems(config)
    if problems:
        noun = "problem" if len(problems) == 1 else "problems"
        detail = f"{len(problems)} {noun} (every broker command refuses to start):\n" + _indent("\n".join(problems))
        checks.append(Check("fail", "agents", detail))
    elif agents:
        checks.append(Check("ok", "agents", ", ".join(agent.identity.agent_id for agent in agents)))
    return checks


def _adapter_checks(config: NexusConfig, env: Mapping[str, str]) -> list[Check]:
    """The enabled adapter accounts: ``fail`` for each whose credential variable is not set."""
    from nexus.config import credential_problems

    enabled = [f"{name}/{account_id}" for name, adapter in sorted(config.adapters.items())
               for account_id, account in sorted(adapter.accounts.items()) if account.enabled]  # fmt: skip
    if not enabled:
        return []
    problems = credential_problems(config.adapters, env)
    if problems:
        return [Check("fail", "adapters", problem) for problem in problems]
    return [Check("ok", "adapters", ", ".join(enabled) + " (credentials set; `nexus adapters health` asks them)")]


def _not_created_yet(name: str, path: Path, when: str) -> Check:
    """A missing path is fine if nexus can create it (its nearest existing parent is writable)."""
    parent = _existing_parent(path)
    if os.access(parent, os.W_OK):
        return Check("ok", name, f"{path} does not exist yet (created on {when})")
    return Check("fail", name, f"{path} cannot be created: {parent} is not writable")


def _database_check(path: Path) -> Check:
    from nexus.cli._state import database_write_problem, path_problem

    problem = path_problem(path, directory=False)
    if problem is not None:
        return Check("fail", "database", f"{problem}: set database in nexus.toml to a file path")
    if not path.exists():
        return _not_created_yet("database", path, "first use")
    problem = database_write_problem(path)  # a read-only file opens fine and fails only at the first write
    if problem is not None:
        return Check("fail", "database", problem)
    try:
        count, recovered = _count_sessions(path)
    except Exception as exc:
        return Check("fail", "database", f"{path} does not open: {exc}")
    detail = f"{path} opens and is writable ({count} session{'s' if count != 1 else ''})"
    if recovered:
        detail += f"; closed {recovered} turn{'s' if recovered != 1 else ''} left open by a stopped process"
    return Check("ok", "database", detail)


def _postgres_check(url: str) -> Check:
    """On a PostgreSQL ledger: reachable, its schema current (nothing migrated, no turn closed: on a shared
    database the turns left open are the leases' business). ``ok`` with what the database holds, or ``fail``
    naming what to do; the URL's password is left out."""
    import asyncio

    from nexus.ledger import Ledger, LedgerError

    async def probe() -> str:
        async with await Ledger.connect(url, migrate=False) as ledger:
            sessions = len(await ledger.sessions.list())
            version = await ledger.database.run_read(
                lambda conn: conn.execute("SELECT current_setting('server_version')").fetchone()[0]
            )
            wakeups = "LISTEN/NOTIFY wake-ups" if ledger.wakeups is not None else "poll-only wake-ups"
            plural = "s" if sessions != 1 else ""
            return f"{ledger.path} (PostgreSQL {version}; schema current; {sessions} session{plural}; {wakeups})"

    try:
        return Check("ok", "database", asyncio.run(probe()))
    except LedgerError as exc:  # unreachable, refused, a schema behind (`nexus db migrate`) or unknown
        return Check("fail", "database", str(exc))


def _count_sessions(path: Path) -> tuple[int, int]:
    """(sessions, turns recovered): like every entry point, doctor closes turns of dead processes."""
    try:
        from nexus.ledger import Ledger
    except ImportError:  # a build without the ledger: look at the file directly
        return _count_with_sqlite(path), 0
    import asyncio

    async def count() -> tuple[int, int]:
        async with await Ledger.connect(path) as ledger:
            recovered = await ledger.turns.recover()
            return len(await ledger.sessions.list()), len(recovered)

    return asyncio.run(count())


def _count_with_sqlite(path: Path) -> int:
    import sqlite3

    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return int(conn.execute("SELECT count(*) FROM sessions").fetchone()[0]) if "sessions" in tables else 0


def _workspace_check(path: Path) -> Check:
    from nexus.cli._state import path_problem

    problem = path_problem(path, directory=True)
    if problem is not None:
        return Check("fail", "workspace", f"{problem}: set workspace in nexus.toml to a directory")
    if not path.exists():
        return _not_created_yet("workspace", path, "first run")
    if not os.access(path, os.W_OK):
        return Check("fail", "workspace", f"{path} is not writable: fix its permissions")
    return Check("ok", "workspace", f"{path} (writable)")


def _local_check(config: NexusConfig) -> Check:
    from nexus.config import LOCAL_INSTALL_HINT, local_model_status

    status = local_model_status(config)
    version = ""
    if status.llama_cpp_installed:
        try:
            import llama_cpp

            version = f"llama-cpp-python {getattr(llama_cpp, '__version__', '?')}"
        except Exception as exc:  # installed but broken (e.g. a missing shared library)
            return Check("warn", "local", f"llama-cpp-python is installed but does not import: {exc}")
    if status.problem is not None:
        return Check("warn", "local", f"offline model unavailable: {status.problem}")
    size = status.weights.stat().st_size / 1e6 if status.weights else 0
    detail = f"{version}; weights {status.weights} ({size:.0f} MB); use -m local/{config.local.model_id}"
    return Check("ok", "local", detail if version else f"{detail} ({LOCAL_INSTALL_HINT})")


def _existing_parent(path: Path) -> Path:
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    return parent
