"""A run's per-call options (``options_for``) are built by the constructor, not ``dataclasses.replace``:
these check that nothing of the caller's template is lost on the way, that the context's settings win,
and that runs never share a mutable part of their options."""

from __future__ import annotations

import dataclasses

from nexus.engine.execution.execute import options_for
from nexus.engine.types import AssembledContext, ThinkingConfig, TokenBudget
from nexus.llm import AbortSignal, StreamOptions, UserMessage


def _ctx(**settings: object) -> AssembledContext:
    return AssembledContext(
        system_prompt="s",
        history=[],
        current_message=UserMessage("hi"),
        model="m",
        provider="p",
        token_budget=TokenBudget(context_window=1_000),
        run_id="r",
        session_label="main",
        **settings,  # type: ignore[arg-type]
    )


def _template() -> StreamOptions:
    """A value other than the default in every field (a field added later fails the check below)."""
    template = StreamOptions(
        temperature=0.3,
        max_tokens=77,
        thinking="high",
        tool_choice="required",
        api_key="k",
        base_url="http://127.0.0.1:9",
        headers={"x-a": "1"},
        timeout=5.0,
        signal=AbortSignal(),
        session_id="sid",
    )
    defaults = StreamOptions()
    same = [f.name for f in dataclasses.fields(StreamOptions) if getattr(template, f.name) == getattr(defaults, f.name)]
    assert same == [], f"give these fields a value other than the default: {same}"
    return template


def test_every_field_of_the_template_reaches_the_run_options() -> None:
    template = _template()
    got = options_for(_ctx(), template)
    assert got is not template
    for f in dataclasses.fields(StreamOptions):
        assert getattr(got, f.name) == getattr(template, f.name), f.name
    assert dataclasses.replace(template) == got


def test_the_context_settings_win_over_the_template() -> None:
    template = _template()
    signal = AbortSignal()
    ctx = _ctx(temperature=0.9, max_response_tokens=12, thinking_config=ThinkingConfig("low"), abort_signal=signal)
    got = options_for(ctx, template)
    assert (got.temperature, got.max_tokens, got.thinking, got.signal) == (0.9, 12, "low", signal)
    assert got.session_id == "sid"  # the template's, else the session label
    assert options_for(_ctx(), StreamOptions()).session_id == "main"


def test_a_run_given_no_options_gets_its_own_headers() -> None:
    first, second = options_for(_ctx(), None), options_for(_ctx(), None)
    first.headers["x-b"] = "2"  # type: ignore[index]
    assert second.headers == {} and options_for(_ctx(), None).headers == {} and StreamOptions().headers == {}
    assert first.session_id == "main" and first.timeout == StreamOptions().timeout


def test_a_subclass_of_the_options_keeps_its_type_and_fields() -> None:
    @dataclasses.dataclass
    class Tagged(StreamOptions):
        tag: str = "t"

    got = options_for(_ctx(temperature=0.5), Tagged(api_key="k", tag="mine"))
    assert isinstance(got, Tagged) and got.tag == "mine" and got.api_key == "k" and got.temperature == 0.5
