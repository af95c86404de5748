"""The steering queue on its own: what it takes at a safe point, what it hands back, and what it holds while a run
gets no steer (most runs: a thousand in flight each hold one queue)."""

from __future__ import annotations

import gc

from nexus.agent import SteeringQueue, SteerReceipt
from nexus.llm import UserMessage


def _receipt(text: str, mode: str = "all") -> SteerReceipt:
    return SteerReceipt(id=text, message=UserMessage(text), mode=mode)  # type: ignore[arg-type]


def test_steers_are_taken_in_order_delivered_when_they_join_and_returned_on_close() -> None:
    settled: list[tuple[str, str]] = []
    queue = SteeringQueue(lambda r: settled.append((r.id, r.status)))
    first, second, alone, late = _receipt("a"), _receipt("b"), _receipt("c", "one"), _receipt("d")
    for receipt in (first, second, alone, late):
        queue.offer(receipt)
    assert queue.pending == 4
    assert queue.take() == [first.message, second.message]  # the leading run of `all` steers
    queue.joined(first.message, 3)
    assert queue.take() == [alone.message]  # a `one` steer alone
    returned = queue.close("the run ended")
    assert {r.id for r in returned} == {"b", "c", "d"} and queue.pending == 0 and queue.closed
    assert settled[0] == ("a", "delivered") and sorted(settled[1:]) == [("b", "returned"), ("c", "returned"),
                                                                        ("d", "returned")]  # fmt: skip
    assert queue.offer(_receipt("e")).status == "returned" and queue.take() == []


def test_a_queue_nobody_steered_holds_no_list_or_dictionary() -> None:
    queue = SteeringQueue()
    assert queue.take() == [] and queue.pending == 0
    queue.joined(UserMessage("not a steer"), 1)
    assert not [held for held in gc.get_referents(queue) if isinstance(held, (list, dict))]
    assert queue.close("done") == []
