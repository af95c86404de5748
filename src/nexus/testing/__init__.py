"""Test doubles for code that talks to LLMs: a scripted model and a fake provider server.

- :class:`ScriptedModel` streams scripted responses in-process (a ``StreamFn`` + ``Model``);
  :func:`by_session` gives many sessions each their own (one stream function, the call's session picks).
- :class:`FakeProviderServer` serves the same scripts over real HTTP on 127.0.0.1, in the
  OpenAI chat-completions and Anthropic messages wire formats, failures included.
- :mod:`nexus.testing.steps` holds the step constructors (``text``, ``tool_call``, ``reply``,
  ``http_error``, ``overflow``, ``stall``, ``cut``, ``malformed``, ``html_error``, ``from_context``,
  and ``replay`` for a provider response captured with ``NEXUS_CAPTURE_DIR``).
- ``nexus.testing.pytest_plugin`` provides the ``fake_provider`` and ``scripted_model`` fixtures.

The server module is imported on first use so ``import nexus.testing`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nexus.testing import steps
from nexus.testing.clock import InstantClock, ManualClock
from nexus.testing.scripted import ScriptedModel, by_session
from nexus.testing.steps import ScriptError

if TYPE_CHECKING:
    from nexus.testing.fake_server import FakeProviderServer, RecordedRequest
    from nexus.testing.telegram import FakeTelegram

__all__ = [
    "FakeProviderServer",
    "FakeTelegram",
    "InstantClock",
    "ManualClock",
    "RecordedRequest",
    "ScriptError",
    "ScriptedModel",
    "by_session",
    "steps",
]


def __getattr__(name: str) -> Any:
    if name == "FakeTelegram":
        from nexus.testing.telegram import FakeTelegram

        return FakeTelegram
    if name in ("FakeProviderServer", "RecordedRequest"):
        from nexus.testing import fake_server

        return getattr(fake_server, name)
    raise AttributeError(f"module 'nexus.testing' has no attribute {name!r}")
