"""Log lines: one per event, text or JSON, with the trace id where a span is current, never a secret."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from span_helpers import recorded_spans

from nexus import telemetry
from nexus.llm.redact import add_secrets, redact
from nexus.telemetry.logs import configure_logging, failure_level

SECRET = "adapter-credential-0123456789"


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level, nexus_level = list(root.handlers), root.level, logging.getLogger("nexus").level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.getLogger("nexus").setLevel(nexus_level)


def test_json_lines_carry_the_fields_and_the_current_trace_and_no_secret(restore_logging: None) -> None:
    out = io.StringIO()
    add_secrets([SECRET])
    configure_logging("json", "info", redact=redact, stream=out)
    log = logging.getLogger("nexus.test")
    with recorded_spans():
        span = telemetry.start_span("work")
        with telemetry.use_span(span):
            log.info("sent with %s", SECRET, extra={"fields": {"event": "send", "agent": "coder", "n": 3}})
            ids = telemetry.log_ids()
        span.end()
    log.info("outside any span")
    logging.getLogger("httpx").info("HTTP Request: POST …")  # another library's chatter stays out
    try:
        raise RuntimeError(f"boom {SECRET}")
    except RuntimeError:
        log.exception("it failed")
    first, second, third = (json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{"))
    assert ids is not None
    assert first["message"] == "sent with [redacted]" and (first["trace_id"], first["span_id"]) == ids
    assert (first["event"], first["agent"], first["n"], first["level"]) == ("send", "coder", 3, "info")
    assert "trace_id" not in second and second["message"] == "outside any span"
    assert third["level"] == "error" and "RuntimeError: boom [redacted]" in third["exception"]
    assert SECRET not in out.getvalue() and "HTTP Request" not in out.getvalue()


def test_text_lines_are_one_per_event_and_quote_what_needs_it(restore_logging: None) -> None:
    out = io.StringIO()
    configure_logging("text", "warning", stream=out)
    log = logging.getLogger("nexus.test")
    log.info("below the level")
    log.warning("delivery failed", extra={"fields": {"adapter": "tg", "error": "bad request: chat not found"}})
    (line,) = out.getvalue().splitlines()
    assert line.endswith(' warning nexus.test: delivery failed adapter=tg error="bad request: chat not found"')


def test_a_second_configuration_replaces_the_first_handler(restore_logging: None) -> None:
    first, second = io.StringIO(), io.StringIO()
    configure_logging("text", stream=first)
    configure_logging("json", stream=second)
    logging.getLogger("nexus.test").info("once")
    assert first.getvalue() == "" and json.loads(second.getvalue())["message"] == "once"


def test_bad_settings_are_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="unknown log format 'yaml': use one of text, json"):
        configure_logging("yaml")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown log level 'loud'"):
        configure_logging("text", "loud")


def test_a_failure_is_a_warning_only_where_logging_was_set_up(restore_logging: None) -> None:
    root = logging.getLogger()
    root.handlers[:] = []
    assert failure_level(logging.getLogger("nexus.run")) == logging.INFO  # no raw warning beside the CLI's own
    configure_logging("text", stream=io.StringIO())
    assert failure_level(logging.getLogger("nexus.run")) == logging.WARNING
