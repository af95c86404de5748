"""Run the LedgerBackend conformance suite against the SQLite ledger (in memory and on disk)."""

from __future__ import annotations

from conformance import *  # noqa: F403
