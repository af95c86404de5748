"""SSE parsing from raw byte chunks, including the awkward splits real networks produce."""

from __future__ import annotations

from nexus.llm._sse import SSEParser


def feed_all(chunks: list[bytes]) -> list[tuple[str | None, str]]:
    parser = SSEParser()
    out: list[tuple[str | None, str]] = []
    for chunk in chunks:
        out.extend(parser.feed(chunk))
    out.extend(parser.flush())
    return out


def test_openai_data_lines() -> None:
    body = b'data: {"a": 1}\n\ndata: {"b": 2}\n\ndata: [DONE]\n\n'
    assert feed_all([body]) == [(None, '{"a": 1}'), (None, '{"b": 2}'), (None, "[DONE]")]


def test_split_at_every_byte_gives_same_events() -> None:
    body = b'event: message_start\ndata: {"x": "\xc3\xa9t\xc3\xa9"}\n\ndata: {"y": 2}\n\n'
    whole = feed_all([body])
    assert whole == [("message_start", '{"x": "été"}'), (None, '{"y": 2}')]
    assert feed_all([body[i : i + 1] for i in range(len(body))]) == whole


def test_crlf_and_lone_cr_line_endings() -> None:
    body = b"event: a\r\ndata: 1\r\n\r\nevent: b\rdata: 2\r\r"
    assert feed_all([body]) == [("a", "1"), ("b", "2")]
    # CRLF split between two chunks must not create an extra blank line
    assert feed_all([b"data: 1\r", b"\ndata: 2\r\n\r\n"]) == [(None, "1\n2")]


def test_multiline_data_comments_and_ignored_fields() -> None:
    body = b": keep-alive\n\nid: 7\nretry: 100\nevent: e\ndata: line1\ndata:line2\n\n"
    assert feed_all([body]) == [("e", "line1\nline2")]


def test_missing_final_blank_line_is_flushed() -> None:
    assert feed_all([b'data: {"last": true}']) == [(None, '{"last": true}')]


def test_invalid_utf8_is_replaced_not_raised() -> None:
    events = feed_all([b"data: \xff\xfe\n\n"])
    assert events == [(None, "\ufffd\ufffd")]
