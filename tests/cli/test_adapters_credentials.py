"""An adapter credential whose variable is not set is caught where it is configured, by the doctor, and
before ``nexus adapters monitor`` starts (only ``adapters health`` found it, and ``monitor`` said
"running" with nothing monitored)."""

from __future__ import annotations

from pathlib import Path

from .cli_process import RunNexus


def _telegram(nexus: RunNexus, **env: str) -> str:
    assert nexus("adapters", "register", "tg", "--builtin", "telegram").returncode == 0
    enabled = nexus(
        "adapters", "enable", "tg/main", "--credential-env", "TELEGRAM_BOT_TOKEN", "--monitor", "--agent", "helper",
        env=env,
    )  # fmt: skip
    assert enabled.returncode == 0, enabled.stderr
    return enabled.stderr


def test_enable_warns_doctor_fails_and_monitor_refuses_while_the_token_is_unset(
    nexus: RunNexus, isolated_env: Path
) -> None:
    warning = _telegram(nexus)
    assert "warning: TELEGRAM_BOT_TOKEN is not set in this shell" in warning and "nexus doctor" in warning
    assert "${TELEGRAM_BOT_TOKEN}" in (isolated_env / "nexus.toml").read_text(), "still written: set it later"
    doctor = nexus("doctor")
    assert doctor.returncode == 1
    assert "tg/main: its credential ${TELEGRAM_BOT_TOKEN} needs TELEGRAM_BOT_TOKEN, which is not set" in doctor.stdout
    monitor = nexus("adapters", "monitor")
    assert monitor.returncode == 2, monitor.stderr
    assert "cannot monitor tg/main" in monitor.stderr and "export TELEGRAM_BOT_TOKEN" in monitor.stderr
    assert "running" not in monitor.stderr and "Traceback" not in monitor.stderr


def test_with_the_token_set_nothing_is_said(nexus: RunNexus) -> None:
    assert "warning" not in _telegram(nexus, TELEGRAM_BOT_TOKEN="1:abc")
    doctor = nexus("doctor", env={"TELEGRAM_BOT_TOKEN": "1:abc"})
    assert "[ok  ] adapters   tg/main (credentials set" in doctor.stdout, doctor.stdout
    assert "1:abc" not in doctor.stdout


def test_a_credential_variable_that_is_no_variable_name_is_refused_and_nothing_is_written(
    nexus: RunNexus, isolated_env: Path
) -> None:
    """``--credential-env "BAD NAME"`` stored ``${BAD NAME}``, which no shell sets and nexus never expands: the
    doctor said "credentials set" and the adapter got that text as its token; ``--credential-env ""`` enabled the
    account with no credential and no word."""
    assert nexus("adapters", "register", "tg", "--builtin", "telegram").returncode == 0
    before = (isolated_env / "nexus.toml").read_text()
    for bad in ("BAD NAME", "", "1TOKEN", "TOKEN}", "${TOKEN}"):
        refused = nexus("adapters", "enable", "tg/main", "--credential-env", bad)
        assert refused.returncode == 2, (bad, refused.stderr)
        assert "--credential-env" in refused.stderr and "letters, digits and _" in refused.stderr, refused.stderr
    assert (isolated_env / "nexus.toml").read_text() == before, "nothing written"
