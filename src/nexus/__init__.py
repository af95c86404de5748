"""Nexus broker: a Python runtime for LLM agents.

Importing ``nexus`` is deliberately cheap: sub-packages (``nexus.llm``, ``nexus.agent``,
``nexus.ledger``, ``nexus.engine`` …) are imported only when used, so the CLI and
embedding applications do not pay for layers they never touch.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
