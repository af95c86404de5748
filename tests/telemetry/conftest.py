"""Every telemetry test starts and ends with telemetry off (it is process-wide, like OpenTelemetry's providers)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from nexus import telemetry


@pytest.fixture(autouse=True)
def telemetry_off() -> Iterator[None]:
    telemetry.disable()
    yield
    telemetry.disable()
