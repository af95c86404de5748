"""Hop numbers of agent-to-agent messages: one past the highest the conversation reached so far.

A message's hop used to be one more than the hop of the message its sender's turn answered. That
bounds a chain, not a conversation: a turn that asks another agent also sends the automatic reply
to the agent that asked it, so each hop level could hold twice the messages of the one before, and
two agents asking each other on every turn made about ``2 ** max_hops`` turns from one message.
Numbering every ask of a conversation past the highest hop it reached (a reply carries the highest,
taking no number of its own) makes ``max_hops`` the asks one conversation may send before a send is
refused; each ask is owed at most one reply, so a conversation passes at most ``2 * max_hops``
messages. The highest hops live in this process, for the most recent conversations; a conversation
it forgot (a restart, another broker sharing the database, evicted) goes on from the hop its
messages carry, so the bound still holds per chain.
"""

from __future__ import annotations

from collections import OrderedDict

CONVERSATIONS_KEPT = 4096
"""Conversations whose highest hop is remembered (about 100 bytes each); the least recent goes first."""


class ConversationHops:
    """The highest hop each recent conversation reached (see the module docstring)."""

    def __init__(self, kept: int = CONVERSATIONS_KEPT) -> None:
        """Remember the ``kept`` most recent conversations."""
        self._highest: OrderedDict[str, int] = OrderedDict()
        self._kept = kept

    def highest(self, conversation_id: str | None, floor: int) -> int:
        """The highest hop ``conversation_id`` reached: at least ``floor``, the hop of the message being
        answered (all there is to go on for a conversation this process does not remember)."""
        if conversation_id is None:
            return floor
        return max(floor, self._highest.get(conversation_id, 0))

    def take(self, conversation_id: str | None, floor: int) -> int:
        """The hop of a new message in ``conversation_id``: one past the highest so far (see :meth:`highest`)."""
        hop = self.highest(conversation_id, floor) + 1
        if conversation_id is not None:
            self._highest[conversation_id] = hop
            self._highest.move_to_end(conversation_id)
            if len(self._highest) > self._kept:
                self._highest.popitem(last=False)
        return hop
