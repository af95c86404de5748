"""The ``[agents.<id>]`` tables of ``nexus.toml`` checked as ``nexus agents add`` and ``POST /v1/agents`` check them.

A table the CLI or the API would refuse - a model no run could reach, a session another agent
talks in or that the API could not address (``a/b``, control characters), a tool that does not
exist (``bsh``) - must not start a broker either, and ``nexus doctor`` reports the same problems.
Each problem names ``file:line`` and the key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nexus.broker.from_config import ConfiguredAgent, configured_agents

if TYPE_CHECKING:
    from nexus.config import NexusConfig


def agent_problems(config: NexusConfig) -> tuple[list[ConfiguredAgent], list[str]]:
    """The configured agents, and one line per problem of theirs (empty: all usable)."""
    agents = configured_agents(config.agents)
    problems: list[str] = []
    owners: dict[str, str] = {}
    for agent in agents:
        agent_id, label = agent.identity.agent_id, agent.identity.session_label
        owner = owners.setdefault(label, agent_id)
        if owner != agent_id:  # two agents in one session would run into one history
            taken = f"{label!r} is agent {owner!r}'s session; give each its own"
            problems.append(_line(config, agent_id, "session", taken))
        elif agent_id in config.agents and config.agents[agent_id].session is not None:
            problems += _session_problems(config, agent_id, label)
        problems += _model_problems(config, agent_id, agent.spec.model)
        problems += _tool_problems(config, agent_id, agent.spec.tools)
    return agents, problems


def model_ref_problems(config: NexusConfig) -> list[str]:
    """``default_model`` and ``fallbacks`` that no run could reach (every run refuses them at its start)."""
    from nexus.engine import unreachable_model_problem

    refs = [("default_model", config.default_model)] if config.default_model else []
    refs += [("fallbacks", ref) for ref in config.fallbacks]
    problems = []
    for key, ref in refs:
        problem = unreachable_model_problem(config, ref)
        if problem is not None:
            problems.append(f"{config.where(key)}: {key}: " + problem.replace("\n", "\n    "))
    return problems


def _line(config: NexusConfig, agent_id: str, key: str, problem: str) -> str:
    return f"{config.where('agents', agent_id, key)}: agents.{agent_id}.{key}: " + problem.replace("\n", "\n    ")


def _session_problems(config: NexusConfig, agent_id: str, label: str) -> list[str]:
    from nexus.ledger import label_problem

    problem = label_problem(label)
    return [] if problem is None else [_line(config, agent_id, "session", problem)]


def _model_problems(config: NexusConfig, agent_id: str, model: object) -> list[str]:
    from nexus.engine import unreachable_model_problem

    problem = None if model is None else unreachable_model_problem(config, str(model))
    return [] if problem is None else [_line(config, agent_id, "model", problem)]


def _tool_problems(config: NexusConfig, agent_id: str, tools: object) -> list[str]:
    """Tool names no tool has, as ``--tools`` refuses them (unless ``[tools] strict_names = false``)."""
    from nexus.config import BUILTIN_TOOL_NAMES, unknown_tool_entries

    if not isinstance(tools, tuple) or not config.tools.strict_names:
        return []
    unknown = unknown_tool_entries(list(tools), BUILTIN_TOOL_NAMES)
    return [_line(config, agent_id, "tools", problem) for problem in unknown]
