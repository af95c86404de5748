"""``python -m nexus.cli`` — the same as the ``nexus`` command."""

from __future__ import annotations

from nexus.cli import main

raise SystemExit(main())
