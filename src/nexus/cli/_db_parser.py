"""Arguments of ``nexus db …``: the ledger's schema and copies between databases."""

from __future__ import annotations

import argparse

_HANDLER = "nexus.cli.db_cmd:db_command"


def add_db(commands: argparse._SubParsersAction[argparse.ArgumentParser], summary: str) -> None:
    """``nexus db migrate|check|copy``."""
    sub = commands.add_parser(
        "db",
        help=summary,
        description=(
            "The ledger is an SQLite file ($NEXUS_HOME/agents.db) or a PostgreSQL database\n"
            '(database = "postgresql://..." in nexus.toml, or NEXUS_DATABASE_URL). See docs/ledger.md.'
        ),
        epilog=(
            "examples:\n  nexus db migrate\n  nexus db check\n  nexus db migrate --database postgresql://nexus@db.internal/nexus\n"
            "  nexus db copy ~/.nexus/agents.db postgresql://nexus@db.internal/nexus\n"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = sub.add_subparsers(title="actions", metavar="ACTION", dest="action")
    actions.required = True
    migrate = actions.add_parser("migrate", help="apply the schema migrations this Nexus ships (safe to repeat)")
    migrate.add_argument("--database", metavar="FILE_OR_URL", help="the database (default: the configured one)")
    migrate.set_defaults(handler=_HANDLER)
    check = actions.add_parser(
        "check", help="check the ledger after a crash or a full disk: integrity, and what it holds (changes nothing)"
    )
    check.add_argument("--database", metavar="FILE_OR_URL", help="the database (default: the configured one)")
    check.set_defaults(handler=_HANDLER)
    copy = actions.add_parser(
        "copy",
        help="copy a whole ledger into an empty database (SQLite <-> PostgreSQL); of a damaged file, what still reads",
    )
    copy.add_argument("source", metavar="SRC", help="an agents.db file or a postgresql:// URL")
    copy.add_argument("target", metavar="DST", help="a new file or an empty PostgreSQL database (schema made)")
    copy.set_defaults(handler=_HANDLER)
