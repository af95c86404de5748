"""When every monitor has ended (its restarts used up), the inbound router says so: ``nexus adapters monitor``
then exits 1 instead of saying "running" with nothing monitored."""

from __future__ import annotations

import asyncio
from pathlib import Path

from adapter_helpers import script_command

from nexus.adapters.supervisor import RestartPolicy
from nexus.broker.host import build_host, start_host
from nexus.config import load_config
from nexus.ledger import Ledger
from nexus.testing import FakeProviderServer
from nexus.testing.steps import echo


def _write_config(home: Path, model: FakeProviderServer, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-inbox.jsonl"  # the example monitor fails at once, every time it starts
    home.mkdir(parents=True, exist_ok=True)
    (home / "nexus.toml").write_text(
        f'default_model = "fake/fake-model"\n\n[providers.fake]\napi = "openai-completions"\n'
        f'base_url = "{model.openai_base_url}"\napi_key = "test"\n\n[agents.helper]\n\n'
        f'[adapters.inbox]\ncommand = "{script_command("inbox.py")}"\n'
        f'[adapters.inbox.accounts.main]\nmonitor = true\nagent = "helper"\n'
        f'config = {{ inbox = "{missing}", outbox = "{tmp_path / "out.jsonl"}" }}\n',
        encoding="utf-8",
    )


async def test_wait_monitors_returns_once_a_failing_monitor_has_used_up_its_restarts(
    isolated_env: Path, tmp_path: Path
) -> None:
    with FakeProviderServer(default=echo) as model, Ledger.open(isolated_env / "agents.db") as ledger:
        _write_config(isolated_env, model, tmp_path)
        config = load_config(None)
        host = build_host(config, ledger, monitors=True)
        inbound = host.inbound
        assert inbound is not None
        inbound.manager.policy = RestartPolicy(max_restarts=2, base_s=0.01, stop_grace_s=0.5)
        try:
            await start_host(config, host)
            await asyncio.wait_for(inbound.wait_monitors(), timeout=60)
        finally:
            await host.close()


async def test_a_monitor_that_gave_up_is_failed_in_a_later_health_until_enabled_again(
    isolated_env: Path, tmp_path: Path
) -> None:
    """The give-up lived only in the process that gave up: ``nexus adapters health`` (another process, the one
    the give-up line sends the user to) asked the adapter and said ``ok``."""
    from nexus.adapters import AdapterManager, clear_adapter_failure

    with FakeProviderServer(default=echo) as model, Ledger.open(isolated_env / "agents.db") as ledger:
        _write_config(isolated_env, model, tmp_path)
        config = load_config(None)
        host = build_host(config, ledger, monitors=True)
        assert host.inbound is not None
        host.inbound.manager.policy = RestartPolicy(max_restarts=2, base_s=0.01, stop_grace_s=0.5)
        try:
            await start_host(config, host)
            await asyncio.wait_for(host.inbound.wait_monitors(), timeout=60)
        finally:
            await host.close()
    later = AdapterManager(config.adapters, home=config.home)
    try:
        status = await later.health("inbox", "main")
        assert not status.ok and status.state == "failed", status
        assert status.detail.startswith("its monitor gave up: adapter inbox/main monitor: gave up after 2 restarts")
        clear_adapter_failure(config.home, "inbox", "main")  # what `nexus adapters enable inbox/main` does
        assert "gave up" not in (await later.health("inbox", "main")).detail
    finally:
        await later.close()
