"""What the model is told about each coding tool: name, label, description, JSON parameters.

The tools' implementations (``read.py``, ``bash.py``…) import their text from here, and
:func:`nexus.tools.coding_tools` builds the tool list from here alone: a run declares all eight
tools to the model but imports a tool's implementation (and its helpers) only when the model
first calls it. Names and parameters are pi's, so sessions move between the two.
"""

from __future__ import annotations

from typing import Any

from nexus.agent import MAX_BYTES, MAX_LINE_CHARS, MAX_LINES, AgentTool, ToolExecuteFn

# --------------------------------------------------------------------------- read

READ_DESCRIPTION = (
    f"Read the contents of a file. Supports text files and images (png, jpeg, gif, webp). Text output is "
    f"truncated to {MAX_LINES} lines or {MAX_BYTES // 1024}KB (whichever comes first); use offset/limit for "
    "large files and keep reading with offset until you have what you need."
)

READ_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "Path to the file to read (relative or absolute)"},
        "offset": {"type": "number", "description": "Line number to start reading from (1-indexed)"},
        "limit": {"type": "number", "description": "Maximum number of lines to read"},
    },
    "required": ["path"],
}

# --------------------------------------------------------------------------- write

WRITE_DESCRIPTION = (
    "Write content to a file. Creates the file if it doesn't exist, overwrites it if it does. "
    "Automatically creates parent directories."
)

WRITE_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "Path to the file to write (relative or absolute)"},
        "content": {"type": "string", "description": "Content to write to the file"},
    },
    "required": ["path", "content"],
}

# --------------------------------------------------------------------------- edit

EDIT_DESCRIPTION = (
    "Edit a file by replacing exact text. oldText must match exactly one place in the file (including "
    "whitespace); add surrounding lines to make it unique. For several changes in one file, pass "
    "edits: [{oldText, newText}, ...] instead; they are all applied or none is."
)

_EDIT_ITEM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "oldText": {"type": "string", "description": "Exact text to find and replace (must match exactly)"},
        "newText": {"type": "string", "description": "New text to replace the old text with"},
    },
    "required": ["oldText", "newText"],
}

EDIT_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "Path to the file to edit (relative or absolute)"},
        "oldText": _EDIT_ITEM["properties"]["oldText"],
        "newText": _EDIT_ITEM["properties"]["newText"],
        "edits": {
            "type": "array",
            "items": _EDIT_ITEM,
            "description": "Several replacements in the same file, each matched against the original content",
        },
    },
    "required": ["path"],
}

# --------------------------------------------------------------------------- ls

LS_DEFAULT_LIMIT = 500

LS_DESCRIPTION = (
    "List directory contents. Entries are sorted alphabetically, directories end with '/', dotfiles are "
    f"included. Output is limited to {LS_DEFAULT_LIMIT} entries (change with limit) or {MAX_BYTES // 1024}KB."
)

LS_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "Directory to list (default: current directory)"},
        "limit": {
            "type": "number",
            "description": f"Maximum number of entries to return (default: {LS_DEFAULT_LIMIT})",
        },
    },
}

# --------------------------------------------------------------------------- find

FIND_DEFAULT_LIMIT = 1000

FIND_DESCRIPTION = (
    "Search for files by glob pattern, e.g. '*.ts', '**/*.json' or 'src/**/*.spec.ts'. A pattern without '/' "
    "matches file names at any depth; with '/' it matches paths relative to the search directory. Returns "
    "paths relative to the workspace (directories end with '/'). Respects .gitignore. "
    f"Limited to {FIND_DEFAULT_LIMIT} results (change with limit) or {MAX_BYTES // 1024}KB."
)

FIND_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pattern": {"type": "string", "description": "Glob pattern to match files, e.g. '*.ts', '**/*.json'"},
        "path": {"type": "string", "description": "Directory to search in (default: current directory)"},
        "limit": {"type": "number", "description": f"Maximum number of results (default: {FIND_DEFAULT_LIMIT})"},
    },
    "required": ["pattern"],
}

# --------------------------------------------------------------------------- grep

GREP_DEFAULT_LIMIT = 100

GREP_DESCRIPTION = (
    "Search file contents for a pattern (regex, or literal with literal=true). Returns matching lines as "
    "path:line: text (context lines as path-line- text), paths relative to the workspace. Respects .gitignore. "
    f"Output is limited to {GREP_DEFAULT_LIMIT} matches (change with limit) or {MAX_BYTES // 1024}KB; "
    f"long lines are cut to {MAX_LINE_CHARS} chars."
)

GREP_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pattern": {"type": "string", "description": "Search pattern (regex or literal string)"},
        "path": {"type": "string", "description": "Directory or file to search (default: current directory)"},
        "glob": {"type": "string", "description": "Filter files by glob pattern, e.g. '*.ts' or '**/*.spec.ts'"},
        "ignoreCase": {"type": "boolean", "description": "Case-insensitive search (default: false)"},
        "literal": {"type": "boolean", "description": "Treat pattern as literal string instead of regex"},
        "context": {"type": "number", "description": "Number of lines to show before and after each match"},
        "limit": {
            "type": "number",
            "description": f"Maximum number of matches to return (default: {GREP_DEFAULT_LIMIT})",
        },
    },
    "required": ["pattern"],
}

# --------------------------------------------------------------------------- apply_patch

APPLY_PATCH_DESCRIPTION = (
    "Apply a unified diff (as produced by `git diff` or `diff -u`) to one or more files. Supports "
    "modifying, creating (--- /dev/null) and deleting (+++ /dev/null) files and git renames. Hunks need "
    "correct context lines; line numbers may be off. If any hunk fails, no file is changed."
)

APPLY_PATCH_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"patch": {"type": "string", "description": "The unified diff text to apply"}},
    "required": ["patch"],
}

# --------------------------------------------------------------------------- bash

BASH_DEFAULT_TIMEOUT = 120.0
"""Seconds a command may run when the call gives no timeout (pi has none; agents left hung commands running)."""

BASH_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "Bash command to execute"},
        "timeout": {"type": "number", "description": "Timeout in seconds (optional)"},
    },
    "required": ["command"],
}


def bash_description(timeout: float | None) -> str:
    """The bash tool's description, which names its default timeout (``None``: no default)."""
    default = f"default {timeout:g}s" if timeout else "no default"
    return (
        "Execute a bash command in the workspace directory. Returns stdout and stderr merged. Output is "
        f"truncated to the last {MAX_LINES} lines or {MAX_BYTES // 1024}KB (the full output is saved to a temp "
        f"file). Optionally give a timeout in seconds ({default}). stdin is closed; do not start interactive programs."
    )


# --------------------------------------------------------------------------- the table

TOOLS: dict[str, tuple[str, str, dict[str, Any], bool]] = {
    "read": ("Read", READ_DESCRIPTION, READ_PARAMETERS, False),
    "write": ("Write", WRITE_DESCRIPTION, WRITE_PARAMETERS, False),
    "edit": ("Edit", EDIT_DESCRIPTION, EDIT_PARAMETERS, False),
    "bash": ("Bash", bash_description(BASH_DEFAULT_TIMEOUT), BASH_PARAMETERS, False),
    "grep": ("Grep", GREP_DESCRIPTION, GREP_PARAMETERS, False),
    "find": ("Find", FIND_DESCRIPTION, FIND_PARAMETERS, False),
    "ls": ("List", LS_DESCRIPTION, LS_PARAMETERS, False),
    "apply_patch": ("Apply patch", APPLY_PATCH_DESCRIPTION, APPLY_PATCH_PARAMETERS, True),
}
"""name -> (label, description, parameters, sequential), in the order ``coding_tools`` returns them
(bash's description here is for its default timeout; :func:`declare` takes another)."""


def declare(name: str, execute: ToolExecuteFn, *, description: str | None = None) -> AgentTool:
    """The :class:`AgentTool` ``name`` as the table describes it, running ``execute``."""
    label, text, parameters, sequential = TOOLS[name]
    text = text if description is None else description
    return AgentTool(name, text, parameters, execute, label, sequential=sequential)
