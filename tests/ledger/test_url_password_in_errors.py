"""A connection error never echoes the URL's password, even when libpq quotes the URL it could not parse."""

from __future__ import annotations

import pytest

pytest.importorskip("psycopg")

from nexus.ledger.errors import LedgerUnavailableError
from nexus.ledger.postgres._database import _probe
from nexus.ledger.postgres._url import scrubbed


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u:secretpw@[bad",  # libpq: '... in URI: "postgresql://u:secretpw@[bad"'
        "postgresql://u:secret%zzpw@h/db",  # libpq: 'invalid percent-encoded token: "secret%zzpw"'
    ],
)
def test_a_url_libpq_cannot_parse_is_named_without_its_password(url: str) -> None:
    with pytest.raises(LedgerUnavailableError) as raised:
        _probe(url)
    message = str(raised.value)
    assert "cannot connect to the ledger database" in message
    assert "secret" not in message


def test_scrubbed_removes_the_url_and_its_password_raw_and_decoded() -> None:
    url = "postgresql://app:p%40ss@db:5432/x"
    text = f'bad "{url}"; token "p%40ss"; decoded p@ss'
    assert scrubbed(text, url) == 'bad "postgresql://app@db:5432/x"; token "…"; decoded …'
    assert scrubbed("no password here", "postgresql://app@db/x") == "no password here"
