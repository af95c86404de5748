"""``nexus sessions …``: list, show, history, fork, compact, export and import, on the Agents Ledger."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nexus._replace_file import replace_file
from nexus.cli._input import printable, terminal_text

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from nexus.config import NexusConfig
    from nexus.errors import UsageError
    from nexus.ledger import DeliveryRecord, Ledger, Session, SessionExistsError, Turn
    from nexus.llm import Message


def sessions_command(args: argparse.Namespace) -> int:
    """Open the ledger named by the config and run one sessions action."""
    from nexus.config import load_config

    config = load_config(args.config)
    if args.action == "compact":
        return _compact(args, config)
    if args.action == "import" and not Path(args.file).is_file():
        from nexus.errors import NexusError

        raise NexusError(f"{args.file} is not a file: give the path of a pi session file (.jsonl)")
    return asyncio.run(_sessions(config, args))


async def _sessions(config: NexusConfig, args: argparse.Namespace) -> int:
    """The sessions action on the open ledger (one coroutine: one event loop for the command)."""
    from nexus.cli._ledger import ledger_exists, open_ledger

    actions: dict[str, Callable[[Ledger, argparse.Namespace], Awaitable[int]]] = {
        "list": _list,
        "show": _show,
        "history": _history,
        "fork": _fork,
        "export": _export,
        "import": _import,
    }
    if args.action in ("list", "show", "history", "export") and not ledger_exists(config):
        if args.action == "list":
            print("no sessions yet" if not args.json else "[]")
            return 0
        from nexus.ledger import SessionNotFound

        raise SessionNotFound(args.label)
    if args.action in ("fork", "import") and args.label:
        _check_new_label(args.label)  # before the ledger is opened: a refused label creates nothing
    target = config.database_target
    if not isinstance(target, str):
        target.parent.mkdir(parents=True, exist_ok=True)
    async with open_ledger(config, reading=args.action in ("list", "show", "history", "export")) as ledger:
        await _recover(ledger)
        return await actions[args.action](ledger, args)


def _check_new_label(label: str) -> None:
    """``--label`` names a new session: one the HTTP API could never address is exit 2."""
    from nexus.errors import UsageError
    from nexus.ledger import label_problem

    problem = label_problem(label)
    if problem is not None:
        raise UsageError(f"--label: {problem}")


def _compact(args: argparse.Namespace, config: NexusConfig) -> int:
    """``nexus sessions compact LABEL``: the engine's manual compaction, reported in one line on stdout.

    Exit 0 when the session was compacted or there was nothing worth compacting (the line says
    which), 1 when summarising failed or the label is unknown, 130 when interrupted.
    """
    from nexus.cli._conversation import compact_now, open_conversation
    from nexus.cli._ledger import ledger_exists
    from nexus.cli.run_cmd import EXIT_INTERRUPTED
    from nexus.errors import UsageError

    if not ledger_exists(config):
        from nexus.ledger import SessionNotFound

        raise SessionNotFound(args.label)
    if not args.label.strip():
        raise UsageError("the session label is empty: give the LABEL of the session to compact")
    options = argparse.Namespace(config=args.config, model=args.model, session=args.label, thinking=None)
    with open_conversation(options) as conversation:
        conversation.session = conversation.resolve(args.label)  # SessionNotFound → exit 1
        line = compact_now(conversation, args.focus or None)
    print(line)
    return EXIT_INTERRUPTED if line.startswith("compaction interrupted") else 0


async def _recover(ledger: Ledger) -> None:
    """Close turns a killed process left open, so every listing shows them (as ``aborted``).

    Only a courtesy for reading commands: when the ledger cannot be written (disk full, database
    held by another process) the listing goes on read-only, open turns shown as open.
    """
    from nexus.cli._ledger import recover_open_turns
    from nexus.ledger import LedgerError

    try:
        await recover_open_turns(ledger)
    except LedgerError as exc:
        print(f"nexus: warning: turns left open by a stopped process stay open for now: {exc}", file=sys.stderr)
        for turn in await ledger.turns.open_turns():
            path = ledger.turns.rescue_file(turn.id)
            if path is not None:
                print(
                    f"nexus: warning: turn {turn.id} of session {turn.session_label!r} is open: its reply is kept"
                    f" in {path} until the ledger can take it",
                    file=sys.stderr,
                )


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def _session_dict(session: Session) -> dict[str, Any]:
    return {
        "label": session.label,
        "head_turn_id": session.head_turn_id,
        "status": session.status,
        "origin": session.origin,
        "is_subagent": session.is_subagent,
        "parent_session_label": session.parent_session_label,
        "created_at": session.created_at,
        "updated_at": session.updated_at,
    }


async def _list(ledger: Ledger, args: argparse.Namespace) -> int:
    from nexus.ledger import SessionQuery

    sessions = await ledger.sessions.list(SessionQuery() if args.all else SessionQuery(status="active"))
    if args.json:
        print(json.dumps([_session_dict(s) for s in sessions], indent=2))
        return 0
    if not sessions:
        print("no sessions yet")
        return 0
    rows = [("LABEL", "TURNS", "UPDATED (UTC)", "ORIGIN", "HEAD")]
    for session in sessions:
        depth = (await ledger.turns.get(session.head_turn_id)).depth + 1 if session.head_turn_id else 0
        origin = session.origin + (" (archived)" if session.status != "active" else "")
        rows.append((session.label, str(depth), _when(session.updated_at), origin, session.head_turn_id or "-"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    return 0


async def _show(ledger: Ledger, args: argparse.Namespace) -> int:
    session = await ledger.sessions.resolve(args.label)
    turns = await ledger.turns.path(session.label)
    head = turns[-1] if turns else None
    info = _session_dict(session) | {
        "aliases": await ledger.sessions.aliases(session.label),
        "turns": len(turns),
        "total_tokens": head.thread_total_tokens if head else 0,
        "usage_estimated": any(turn.usage_estimated for turn in turns),
        "head_model": f"{head.provider}/{head.model}" if head and head.model else None,
        "head_status": head.status if head else None,
    }
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    for key, value in info.items():
        if key == "usage_estimated":
            continue  # shown with total_tokens
        if key in ("created_at", "updated_at"):
            value = _when(value)
        elif key == "total_tokens" and info["usage_estimated"]:
            value = f"~{value} (estimated: a server reported no usage)"
        elif isinstance(value, list):
            value = ", ".join(value) or "-"
        print(f"{key:<22}{'-' if value is None else value}")
    return 0


async def _history(ledger: Ledger, args: argparse.Namespace) -> int:
    from nexus.cli._history_compaction import compaction_json, compaction_lines
    from nexus.llm import message_to_dict

    session = await ledger.sessions.resolve(args.label)
    turns = await ledger.turns.path(session.label)
    deliveries = await ledger.deliveries.for_turns([t.id for t in turns]) if not args.json else {}
    for turn in turns:
        stored = await ledger.turns.messages(turn.id)
        compaction = await ledger.turns.compaction(turn.id) if turn.turn_type == "compaction" else None
        if args.json:
            if compaction is not None:
                print(json.dumps(compaction_json(turn.id, compaction)))
            for item in stored:
                print(json.dumps({"turn_id": turn.id, "message": message_to_dict(item.message)}))
            continue
        print(_turn_header(turn, [item.message for item in stored]))
        for line in compaction_lines(compaction, raw=args.raw, short=_short) if compaction is not None else []:
            print(terminal_text(line))
        for item in stored:  # anyone who can message the agent wrote these: no raw control characters
            print(terminal_text(_render(item.message, raw=args.raw)))
        why = _turn_error(turn, [item.message for item in stored])
        if why is not None:
            print(terminal_text(why))
        for record in deliveries.get(turn.id, []):
            print(delivery_line(record))
        print()
    return 0


def delivery_line(record: DeliveryRecord) -> str:
    """One line per delivery under its turn: where the reply went, the outcome, the platform's message ids.

    One line whatever the adapter reported: its ids and error are its own text, a newline in them shown
    as ``\\n`` (a raw one would print a forged line below the real one).
    """
    to = record.target.get("to", "?")
    thread = f"#{record.target['thread_id']}" if record.target.get("thread_id") else ""
    where = f"{record.adapter}/{record.account_id}:{to}{thread} ({record.path})"
    ids = f"; message ids: {', '.join(record.message_ids)}" if record.message_ids else ""
    tries = f"; {record.attempts} send attempts" if record.attempts > 1 else ""
    error = f": {record.error}" if record.error else ""
    return printable(f"  ⇢ {record.status} to {where}{ids}{tries}{error}")


def _turn_header(turn: Turn, messages: list[Message]) -> str:
    """The turn's line; its model is the one that answered (a fallback's), which the turn's own record, written
    when the turn opened, does not know."""
    from nexus.llm import AssistantMessage

    answered = next((m for m in reversed(messages) if isinstance(m, AssistantMessage) and m.model), None)
    provider, name = (answered.provider, answered.model) if answered is not None else (turn.provider, turn.model)
    model = f" {provider}/{name}" if name else ""
    tokens = f" {turn.total_tokens} tokens" if turn.total_tokens else ""
    if turn.usage_estimated:
        tokens = f" ~{turn.total_tokens} tokens (estimated)"
    kind = " compaction" if turn.turn_type == "compaction" else ""
    return f"── turn {turn.id} [{turn.status}{kind}]{model}{tokens} {_when(turn.started_at)}"


_RECOVERED_BEFORE, _RECOVERED = "closed by recover()", "closed when the ledger was next opened"
"""How a turn a stopped process left was closed: older ledgers hold the first wording, which names a Python call."""


def _turn_error(turn: Turn, messages: list[Message]) -> str | None:
    """Why a failed or aborted turn ended, when no message of it says so already: a turn killed before
    anything was journaled showed nothing, and one whose compaction failed showed only the overflow."""
    from nexus.llm import AssistantMessage

    error = turn.error.get("message") if turn.status in ("failed", "aborted") and turn.error else None
    if not error:
        return None
    said = {m.error_message for m in messages if isinstance(m, AssistantMessage) and m.error_message}
    text = " ".join(str(error).split()).replace(_RECOVERED_BEFORE, _RECOVERED)
    return None if text in {" ".join(s.split()) for s in said} else f"  ✗ {turn.status}: {text}"


def typed_text(text: str) -> str:
    """The text the user typed: a stored user message minus the ``[Event context]`` header the engine put first.

    Text without the header comes back unchanged (see ``split_event_context``).
    """
    from nexus.engine import split_event_context

    return split_event_context(text)[1]


def _render(message: Message, *, raw: bool = False) -> str:
    from nexus.llm import AssistantMessage, ToolResultMessage

    if isinstance(message, ToolResultMessage):
        mark = "error" if message.is_error else "result"
        return f"  tool {mark} ({message.tool_name}): {message.text if raw else _short(message.text)}"
    if isinstance(message, AssistantMessage):
        parts = [f"  assistant: {message.text}"] if message.text else []
        parts += [f"  → {call.name}({json.dumps(call.arguments)})" for call in message.tool_calls]
        if message.error_message:
            parts.append(f"  ({message.stop_reason}: {message.error_message})")
        return "\n".join(parts) or "  assistant: (empty)"
    content = message.content
    text = content if isinstance(content, str) else "".join(getattr(b, "text", "[image]") for b in content)
    return f"  user: {text if raw else typed_text(text)}"


def _short(text: str, limit: int = 400) -> str:
    flat = text.replace("\n", " ⏎ ")
    return flat if len(flat) <= limit else f"{flat[:limit]}… ({len(text)} chars)"


async def _fork(ledger: Ledger, args: argparse.Namespace) -> int:
    """The ledger's one fork rule (``fork_session``): any turn; without ``--label``, ``<turn's session>-fork-N``."""
    from nexus.ledger import SessionExistsError, fork_session

    try:
        session = await fork_session(ledger, args.turn_id, label=args.label or None)
    except SessionExistsError as exc:  # a --label taken: a wrong argument, exit 2 like every other label error
        raise _label_taken(exc) from None
    print(f"forked session {session.label} at turn {args.turn_id}")
    print(f"continue it with: nexus run -s {session.label} MESSAGE")
    return 0


def _label_taken(exc: SessionExistsError, given: bool = True) -> UsageError:
    """A new session's label is taken: exit 2 (docs/cli.md's table: a wrong argument), naming ``--label`` when it
    was given; else the label came from the file (an import of the same file twice) and the advice is to give one."""
    from nexus.errors import UsageError

    if given:
        return UsageError(
            f"--label: a session or alias named {exc.label!r} already exists; give another with --label NAME"
        )
    return UsageError(
        f"the file's session is already imported as {exc.label!r} (a session or alias of that name exists); "
        "give the import another name with --label NAME"
    )


async def _export(ledger: Ledger, args: argparse.Namespace) -> int:
    session = await ledger.sessions.resolve(args.label)
    data = await ledger.pi.export_pi(session.label)
    if args.output in (None, "-"):  # stdout unless -o FILE: `nexus sessions export main > main.jsonl`
        sys.stdout.write(data)
        return 0
    written = write_file_atomically(Path(args.output), data)
    print(f"exported session {session.label} to {written}")
    return 0


def write_file_atomically(path: Path, data: str) -> Path:
    """Write ``data`` to ``path`` via a temporary file beside it; any failure is one clear error, no leftovers.

    Exit code 1 (``NexusError``): the arguments were well formed, the file system refused.
    """
    from nexus.errors import NexusError

    target = path.expanduser()
    parent = target.parent
    if target.is_dir():
        raise NexusError(f"cannot export to {path}: it is a directory; give a file name, e.g. -o {path}/session.jsonl")
    if not parent.is_dir():
        raise NexusError(f"cannot export to {path}: the directory {parent} does not exist; create it first")
    try:  # a symlink followed, a device written into (-o /dev/stdout), an existing file's mode kept
        return replace_file(target, data)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise NexusError(f"cannot export to {path}: {reason}") from None


async def _import(ledger: Ledger, args: argparse.Namespace) -> int:
    from nexus.ledger import SessionExistsError

    source = Path(args.file)  # a file: checked before the ledger was opened
    try:
        result = await ledger.pi.import_pi(source, args.label)
    except SessionExistsError as exc:  # the same file twice: say how to import it again
        raise _label_taken(exc, given=bool(args.label)) from None
    label = getattr(result, "session_label", None) or str(result)
    turns, messages = getattr(result, "turns", None), getattr(result, "messages", 0)
    extra = f" ({_counted(turns, 'turn')}, {_counted(messages, 'message')})" if turns is not None else ""
    # stdout is the new label alone, for scripts: label=$(nexus sessions import file.jsonl)
    print(label)
    print(f"imported {source} as session {label}{extra}", file=sys.stderr)
    forks = getattr(result, "fork_labels", None)
    if forks:
        print(f"branches became sessions: {', '.join(forks)}", file=sys.stderr)
    if turns is not None and not messages:  # only entries nothing reads: a session no model sees anything in
        print(f"nexus: warning: {source} holds no message: session {label} is empty", file=sys.stderr)
    unknown = result.unknown_entries()
    if unknown:  # a newer pi's entry, another tool's, a typo: kept and exported back, read by nothing here
        kinds = ", ".join(f"{count} {kind!r}" for kind, count in unknown.items())
        print(f"nexus: warning: entries of a type pi's session format does not define ({kinds}) kept as metadata "
              "of their turns and exported back as they came; nothing here reads them", file=sys.stderr)  # fmt: skip
    unread = getattr(result, "kept_entries", {}).get("message", 0)
    if unread:  # a role Nexus does not know (pi's bashExecution, a typo): kept, but no model will see it
        noun = "message" if unread == 1 else "messages"
        print(f"nexus: warning: {unread} {noun} of a role other than user, assistant and toolResult kept as "
              "metadata only: not in the conversation a model sees", file=sys.stderr)  # fmt: skip
    return 0


def _counted(count: int, noun: str) -> str:
    """``1 turn``, ``2 turns``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
