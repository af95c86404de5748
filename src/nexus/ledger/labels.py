"""Which new session labels can be addressed again: by the HTTP API (one path segment) and by people.

Light (no imports): the CLI (`nexus run/chat -s`, `sessions fork/import --label`, `agents add
--session`) and the server (`POST /v1/agents`, fork, import) ask here before they create a session.
"""

from __future__ import annotations

MAX_LABEL_CHARS = 200
"""The longest new session label a person or a client names (``-s``, ``--label``, the server's session names):
room for any name one types, not for a paste of a document (which then filled every session list). The labels
the broker derives from session keys (docs/broker.md) are its own and not held to it."""


def label_problem(label: str) -> str | None:
    """Why the API could not address a new session named ``label`` again, or None.

    ``/`` is kept for sub-agents' sessions (``<parent>/<label>-<ulid>``), ``\\`` and ``.`` / ``..``
    no web address keeps as they are; control characters and edge spaces are names nobody can type
    back (the broker's own session labels obey the same rule), and a label a person gives is at
    most :data:`MAX_LABEL_CHARS` long. Only new labels are checked: a
    session an older version created with such a label stays usable where it can be named.
    """
    if "/" in label or "\\" in label:
        return f"a session label cannot hold '/' or '\\' (got {label!r})"
    if label in (".", ".."):  # a browser's URL parser folds `/v1/sessions/../history` into `/v1/history`
        return f"a session label cannot be {label!r} (a web address would drop it)"
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in label):
        return f"a session label cannot hold control characters (got {label!r})"
    if label != label.strip():
        return f"a session label cannot start or end with spaces (got {label!r})"
    if len(label) > MAX_LABEL_CHARS:
        return f"a session label is at most {MAX_LABEL_CHARS} characters (got {len(label):,}: {label[:20]!r}...)"
    return None


def imported_label(file_id: object) -> str:
    """The label of a session imported without one: ``pi-`` and the start of the file's session id, keeping only
    letters, digits, ``.``, ``_`` and ``-`` (an id that keeps none gets a random one).

    The id is whatever the file says: a stranger's trial imported ``ab/cd/../ef`` (a session the HTTP API could
    not address), a newline with an escape sequence (it broke ``label=$(nexus sessions import f)``) and edge
    spaces; a label given with ``--label`` was checked, this one was not.
    """
    text = file_id if isinstance(file_id, str) else ""
    kept = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "._-") else "-" for ch in text)
    while "--" in kept:
        kept = kept.replace("--", "-")
    kept = kept.strip("-.")[:13].rstrip("-.")
    if not kept:
        import uuid

        kept = uuid.uuid4().hex[:13]
    return f"pi-{kept}"
