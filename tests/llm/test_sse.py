"""SSE parsing from raw byte chunks, including the awkward splits real networks produce."""

from __future__ import annotations

import json

import pytest

from nexus.llm._sse import SSEParser, _parse_block, parse_data


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


# Blocks the two fast paths must read exactly as the general parser does, including the
# near misses that must fall through to it (no space after the colon, a second data line,
# a trailing field, a comment).
_BLOCKS = [
    'data: {"a": 1}',
    "data:{}",
    "data: ",
    "data: x\ndata: y",
    "data: x\nid: 3",
    'event: content_block_delta\ndata: {"t": 1}',
    "event: e\ndata: ",
    "event: \ndata: x",
    "event:e\ndata: x",
    "event: e\ndata:x",
    "event: e\ndata: x\ndata: y",
    "event: e\ndata: x\nid: 1",
    "event: e\n: comment",
    "event: e",
    "event: e\nevent: f\ndata: x",
    ": only a comment",
    "id: 1\ndata: x",
]


def test_fast_paths_agree_with_the_general_parser() -> None:
    for block in _BLOCKS:
        expected = _parse_block(block)
        assert SSEParser().feed(block.encode() + b"\n\n") == ([expected] if expected else []), block


def test_parse_data_is_json_loads() -> None:
    for text in ['{"a": [1, 2.5, null, true]}', "[1]", '"s"', "3", " {}", "{} ", "\n{}\n", '{"é": "\\u00e9"}']:
        assert parse_data(text) == json.loads(text), text
    for bad in ["", " ", "{", "{} x", "{}{}", "nan x", "[1,]", "'a'"]:
        with pytest.raises(ValueError) as got:
            parse_data(bad)
        with pytest.raises(ValueError) as want:
            json.loads(bad)
        assert str(got.value) == str(want.value), bad
