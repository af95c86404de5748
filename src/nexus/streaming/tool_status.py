"""One human line per tool call: "Reading package.json" while it runs, "Read package.json" when done.

``tool_status.summary`` (seed 004) is what a chat user sees instead of the tool's output, so
it names the action and its object, and the one number that matters ("Edited src/app.py
(+3 -1)", "Ran `pytest -q` (exit 0)"), never the first characters of the output. Unknown
tools get a generic line from their name. Pure functions over the call's arguments and the
result's ``details`` (what the built-in tools report), so any caller can use them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

_COMMAND_CHARS = 60
_PATH_CHARS = 80


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _arg(args: Mapping[str, Any], *names: str) -> str:
    for name in names:
        value = args.get(name)
        if isinstance(value, str) and value:
            return value
    return ""


def _path(args: Mapping[str, Any]) -> str:
    return _clip(_arg(args, "path", "file_path", "file") or ".", _PATH_CHARS)


def _diff_counts(diff: object) -> tuple[int, int] | None:
    if not isinstance(diff, str):
        return None
    added = removed = 0
    for line in diff.splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed


def _count(details: Mapping[str, Any], key: str) -> int | None:
    value = details.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _read(args: Mapping[str, Any], details: Mapping[str, Any], done: bool) -> str:
    return f"{'Read' if done else 'Reading'} {_path(args)}"


def _write(args: Mapping[str, Any], details: Mapping[str, Any], done: bool) -> str:
    if not done:
        return f"Writing {_path(args)}"
    content = args.get("content")
    lines = f" ({content.count(chr(10)) + (not content.endswith(chr(10)))} lines)" if isinstance(content, str) else ""
    return f"Wrote {_path(args)}{lines if content else ''}"


def _edit(args: Mapping[str, Any], details: Mapping[str, Any], done: bool) -> str:
    if not done:
        return f"Editing {_path(args)}"
    counts = _diff_counts(details.get("diff"))
    suffix = f" (+{counts[0]} \u2212{counts[1]})" if counts else ""
    return f"Edited {_path(args)}{suffix}"


def _bash(args: Mapping[str, Any], details: Mapping[str, Any], done: bool) -> str:
    command = _clip(_arg(args, "command", "cmd"), _COMMAND_CHARS)
    if not done:
        return f"Running `{command}`"
    if details.get("timed_out"):
        return f"Ran `{command}` (timed out)"
    code = _count(details, "exit_code")
    return f"Ran `{command}`" + ("" if code is None else f" (exit {code})")


def _grep(args: Mapping[str, Any], details: Mapping[str, Any], done: bool) -> str:
    pattern = _clip(_arg(args, "pattern", "query"), _COMMAND_CHARS)
    if not done:
        return f"Searching for `{pattern}`"
    matches = _count(details, "matches")
    return f"Searched for `{pattern}`" + ("" if matches is None else f" ({_plural(matches, 'match', 'matches')})")


def _find(args: Mapping[str, Any], details: Mapping[str, Any], done: bool) -> str:
    pattern = _clip(_arg(args, "pattern", "glob"), _COMMAND_CHARS)
    if not done:
        return f"Finding `{pattern}`"
    count = _count(details, "count")
    return (
        f"Found {_plural(count, 'file', 'files')} matching `{pattern}`" if count is not None else f"Found `{pattern}`"
    )


def _ls(args: Mapping[str, Any], details: Mapping[str, Any], done: bool) -> str:
    entries = _count(details, "entries")
    base = f"{'Listed' if done else 'Listing'} {_path(args)}"
    return base + (f" ({_plural(entries, 'entry', 'entries')})" if done and entries is not None else "")


def _apply_patch(args: Mapping[str, Any], details: Mapping[str, Any], done: bool) -> str:
    if not done:
        return "Applying a patch"
    files = details.get("files")
    return (
        f"Applied a patch to {_plural(len(files), 'file', 'files')}" if isinstance(files, list) else "Applied a patch"
    )


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


_DESCRIBERS: dict[str, Callable[[Mapping[str, Any], Mapping[str, Any], bool], str]] = {
    "read": _read,
    "write": _write,
    "edit": _edit,
    "bash": _bash,
    "grep": _grep,
    "find": _find,
    "ls": _ls,
    "apply_patch": _apply_patch,
}


def summary(
    tool_name: str,
    args: Mapping[str, Any] | None = None,
    *,
    done: bool = True,
    details: Mapping[str, Any] | None = None,
    failed: bool = False,
) -> str:
    """The human line for one tool call: running (``done=False``) or finished (with ``details``).

    ``failed`` appends " (failed)" to the finished line, so a chat shows what was attempted.
    """
    describe = _DESCRIBERS.get(tool_name.lower())
    args = args or {}
    details = details or {}
    if describe is None:
        line = f"{'Ran' if done else 'Running'} {tool_name}"
    else:
        try:
            line = describe(args, details, done)
        except Exception:  # odd arguments from a model must never break the stream
            line = f"{'Ran' if done else 'Running'} {tool_name}"
    return f"{line} (failed)" if failed and done and "(timed out)" not in line else line
