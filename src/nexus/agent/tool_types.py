"""The tool contract between the agent loop (``nexus.agent``) and tool sets (``nexus.tools``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import field
from typing import Any

from nexus._dataclass import dataclass
from nexus.llm import AbortSignal, TextContent, Tool, UserContent


@dataclass(slots=True)
class AgentToolResult:
    """What a tool returns: content for the model, ``details`` for UIs and the ledger.

    A tool reports failure by raising (any exception; its message goes to the model as
    an error result) or by returning ``is_error=True``.
    """

    content: list[UserContent]
    details: dict[str, Any] | None = None
    is_error: bool = False

    @classmethod
    def text(cls, text: str, *, details: dict[str, Any] | None = None, is_error: bool = False) -> AgentToolResult:
        """A result made of one text block."""
        return cls([TextContent(text)], details, is_error)


ToolUpdateFn = Callable[[AgentToolResult], None]
"""Called by a running tool with partial results (e.g. bash output so far)."""

ToolExecuteFn = Callable[[str, dict[str, Any], AbortSignal, ToolUpdateFn], Awaitable[AgentToolResult]]
"""``execute(tool_call_id, validated_args, signal, on_update)``."""


@dataclass(slots=True)
class AgentTool:
    """A tool the agent can run.

    ``parameters`` is the JSON schema the model sees; ``validate`` (optional) turns the
    model's raw arguments into the arguments ``execute`` receives, raising
    ``ValueError`` with a readable message when they are wrong; without one the loop checks the
    arguments against ``parameters`` (required properties, basic types, ``enum``; numbers and
    booleans sent as strings are coerced) and answers the model with the problems. ``sequential`` tools
    never run concurrently with other calls of the same batch.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    execute: ToolExecuteFn
    label: str = ""
    validate: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    sequential: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    _declared: Tool | None = field(default=None, init=False, repr=False, compare=False)

    def as_llm_tool(self) -> Tool:
        """The provider-neutral declaration sent to the model.

        Made once and handed out again while the name, description and schema are the same
        objects: every run declares its tools (a dozen for the coding set), and a new ``Tool``
        for each on every run was work for nothing. ``Tool`` is frozen, so sharing one is safe;
        reassigning a field here makes a new one.
        """
        declared = self._declared
        if (
            declared is None
            or declared.name is not self.name
            or declared.description is not self.description
            or declared.parameters is not self.parameters
        ):
            declared = self._declared = Tool(self.name, self.description, self.parameters)
        return declared
