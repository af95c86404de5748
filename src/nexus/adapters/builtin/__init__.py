"""The adapters shipped with Nexus, each a real executable (``python -m nexus.adapters.builtin.<name>``).

- ``console``: renders deliveries in the terminal (stderr or a file); can ``stream``.
- ``jsonl``: appends every delivery to a JSONL file (for tests and scripts); can ``stream``.
- ``telegram``: the Telegram Bot API (long polling, sendMessage, throttled editMessageText).

They speak the same stdio protocol as any adapter (docs/adapters.md) and import nothing
heavy, because ``send`` starts one process per block.
"""
