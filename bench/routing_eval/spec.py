"""The little language the routing evaluation set is written in (see README.md beside this file).

A :class:`Sess` is one piece of past work: an agent's session in one workspace, made of *episodes*
(a run of turns on one sub-task). Each episode carries the tasks that should continue it: a task is
routed correctly when it lands on the **last turn of that episode on that branch** (earlier turns of
the episode are superseded by their descendants, later episodes are other work). A :class:`Fork`
branches off the last turn of one of its session's episodes and goes on with episodes of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class T:
    """One turn: the user's request, the gist of the reply, the files its tool calls read and wrote."""

    ask: str
    reply: str
    reads: str = ""
    writes: str = ""
    status: str = "completed"
    """``completed`` or ``failed``/``aborted``: a turn that went wrong is a poor place to continue."""

    def read_paths(self) -> list[str]:
        return self.reads.split()

    def write_paths(self) -> list[str]:
        return self.writes.split()


@dataclass(frozen=True, slots=True)
class E:
    """An episode: turns on one sub-task, and tasks (paraphrases) that should continue its last turn."""

    name: str
    turns: list[T]
    tasks: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Fork:
    """A branch off the last turn of episode ``at`` of its session, going on with ``episodes``."""

    at: int
    key: str
    episodes: list[E]
    parent_tasks: list[str] = field(default_factory=list)
    """Tasks for the *parent's* continuation past the fork point (its newest turn, not the fork's)."""


@dataclass(frozen=True, slots=True)
class Sess:
    """A session: an agent's work in one workspace, ``age_days`` before the evaluation's "now"."""

    key: str
    agent: str
    workspace: str
    age_days: float
    episodes: list[E]
    forks: list[Fork] = field(default_factory=list)
    stale: bool = False
    """The files this session touched are changed on disk after it was indexed (another checkout reset,
    a teammate's edit): its context is stale. Its tasks then belong to :attr:`fresh_twin` instead."""
    fresh_twin: str | None = None
    """For a stale session: the key of the older session that did the same work in a checkout whose files
    are still as that work left them. Tasks written under the stale session expect the twin's last turn
    of the same episode index."""
