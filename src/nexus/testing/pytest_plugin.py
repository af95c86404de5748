"""pytest fixtures for the Nexus test doubles.

Installed ``nexus-broker`` registers this module as the pytest plugin ``nexus_testing``
(``pytest11`` entry point), so the fixtures are there in every test without any import;
``-p no:nexus_testing`` switches it off. Without the installed package, enable it with
``pytest_plugins = ["nexus.testing.pytest_plugin"]`` in the top-level ``conftest.py``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from nexus.testing.fake_server import FakeProviderServer
from nexus.testing.scripted import ScriptedModel


@pytest.fixture
def fake_provider() -> Iterator[FakeProviderServer]:
    """A started :class:`FakeProviderServer` with an empty script, stopped after the test."""
    with FakeProviderServer() as server:
        yield server


@pytest.fixture
def scripted_model() -> Iterator[ScriptedModel]:
    """An empty :class:`ScriptedModel` registered in ``nexus.llm.registry`` for the test's duration."""
    model = ScriptedModel().register()
    try:
        yield model
    finally:
        model.unregister()
