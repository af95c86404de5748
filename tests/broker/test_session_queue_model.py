"""SessionQueue against a plain model of it: random operations, the same answers.

The queue keeps dicts beside its list (item id, message id) and counts its ``interrupt`` items so
an accept never scans the queue; the model below keeps only the list and scans it for every
answer, as the queue did before. Any index that drifts from the list shows as a different answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import example, given, settings
from hypothesis import strategies as st

from nexus.broker import QueuedMessage, QueueMode, QueueSettings, SessionQueue, Wait
from nexus.broker.session_queue import Batch

MODES: tuple[QueueMode, ...] = ("followup", "collect", "interrupt", "steer", "queue")


@dataclass
class ModelQueue:
    """The queue's rules, by scanning one list (the reference)."""

    items: list[QueuedMessage] = field(default_factory=list)
    last_enqueued_at_ms: int = 0

    def waiting(self) -> list[QueuedMessage]:
        return [item for item in self.items if not item.in_flight]

    def add(self, message: QueuedMessage, cap: int) -> tuple[bool, list[str]]:
        if any(i.message_id == message.message_id and i.route == message.route for i in self.items):
            return False, []
        waiting = self.waiting()
        over = len(waiting) >= cap and message.mode != "interrupt"  # an interrupt is never capped (its turn takes all)
        dropped = waiting[: len(waiting) - cap + 1] if over else []
        self.items = [item for item in self.items if item not in dropped]
        self.items.append(message)
        self.last_enqueued_at_ms = max(self.last_enqueued_at_ms, message.enqueued_at_ms)
        return True, [item.item_id for item in dropped]

    def next_batch(self, now_ms: int) -> list[str] | int | None:
        waiting = self.waiting()
        if not waiting:
            return None
        interrupts = [n for n, item in enumerate(waiting) if item.mode == "interrupt"]
        if interrupts:
            taken = waiting[: interrupts[-1] + 1]
        elif waiting[0].mode != "collect":
            taken = waiting[:1]
        elif now_ms < self.last_enqueued_at_ms + waiting[0].debounce_ms:
            return self.last_enqueued_at_ms + waiting[0].debounce_ms
        else:
            taken = [waiting[0]]
            for item in waiting[1:]:
                if item.mode != "collect" or item.route != waiting[0].route:
                    break
                taken.append(item)
        for item in taken:
            item.in_flight = True
        return [item.item_id for item in taken]

    def ready_at(self) -> int | None:
        waiting = self.waiting()
        if not waiting:
            return None
        if waiting[0].mode != "collect" or any(item.mode == "interrupt" for item in waiting):
            return 0
        return self.last_enqueued_at_ms + waiting[0].debounce_ms


operation = st.one_of(
    st.tuples(
        st.just("add"), st.integers(0, 8), st.sampled_from(MODES), st.sampled_from(("", "dm")), st.integers(0, 40)
    ),
    st.tuples(st.just("batch"), st.integers(0, 2000)),
    st.tuples(st.just("complete"), st.booleans()),
    st.tuples(st.just("release")),
    st.tuples(st.just("clear")),
    st.tuples(st.just("retune"), st.integers(0, 8), st.sampled_from(MODES)),
    st.tuples(st.just("restore"), st.integers(0, 8), st.sampled_from(MODES), st.integers(0, 40)),
    st.tuples(st.just("mark_in_flight"), st.integers(0, 60)),
)


def _message(n: int, mode: QueueMode, route: str, debounce: int, clock: int) -> QueuedMessage:
    return QueuedMessage(f"item-{clock}", f"msg-{n}", f"prompt {n}", mode, clock * 10, debounce, route=route)


def _pair(n: int, mode: QueueMode, route: str, debounce: int, clock: int) -> tuple[QueuedMessage, QueuedMessage]:
    return _message(n, mode, route, debounce, clock), _message(n, mode, route, debounce, clock)


@example(  # twins of one message id (restored), the oldest taken: the other still makes it a duplicate
    [("restore", 1, "followup", 0), ("restore", 1, "followup", 0), ("batch", 100), ("complete", True),
     ("add", 1, "followup", "", 0)],
    5,
)  # fmt: skip
@settings(max_examples=500, deadline=None)
@given(st.lists(operation, max_size=60), st.integers(1, 6))
def test_the_queue_answers_as_a_list_scan_would(operations: list[tuple[object, ...]], cap: int) -> None:
    queue, model = SessionQueue(), ModelQueue()
    for clock, op in enumerate(operations):
        kind = op[0]
        if kind == "add":
            _, n, mode, route, debounce = op
            mine, theirs = _pair(int(str(n)), mode, str(route), int(str(debounce)), clock)  # type: ignore[arg-type]
            outcome = queue.add(mine, QueueSettings(cap=cap))
            accepted, dropped = model.add(theirs, cap)
            assert outcome.accepted == accepted
            assert [item.item_id for item in outcome.dropped] == dropped
        elif kind == "batch":
            now = int(str(op[1]))
            step = queue.next_batch(now)
            expected = model.next_batch(now)
            if isinstance(step, Batch):
                assert step.item_ids == expected
            elif isinstance(step, Wait):
                assert step.until_ms == expected
            else:
                assert expected is None
        elif kind == "complete":
            in_flight = [item.item_id for item in model.items if item.in_flight]
            done = in_flight if op[1] else in_flight[1:]
            queue.complete(done)
            model.items = [item for item in model.items if item.item_id not in done]
        elif kind == "release":
            ids = [item.item_id for item in model.items if item.in_flight]
            queue.release(ids)
            for item in model.items:
                item.in_flight = False
        elif kind == "clear":
            removed = [item.item_id for item in queue.clear()]
            assert removed == [item.item_id for item in model.waiting()]
            model.items = [item for item in model.items if item.in_flight]
        elif kind == "restore":  # what the ledger holds (a restart, another process's row): no cap, no dedupe
            _, n, mode, debounce = op
            mine, theirs = _pair(int(str(n)), mode, "", int(str(debounce)), clock)  # type: ignore[arg-type]
            queue.restore(mine)
            model.items.append(theirs)
        elif kind == "mark_in_flight":  # a steer handed to the run
            wanted = f"item-{op[1]}"
            queue.mark_in_flight([wanted])
            for item in model.items:
                if item.item_id == wanted:
                    item.in_flight = True
        else:
            _, n, mode = op
            for theirs in model.items:
                if theirs.message_id == f"msg-{n}":
                    mine = queue.find(theirs.item_id)
                    assert mine is not None
                    queue.retune(mine, mode, mine.debounce_ms)  # type: ignore[arg-type]
                    theirs.mode = mode  # type: ignore[assignment]
        assert [(item.item_id, item.in_flight, item.mode) for item in queue.items] == [
            (item.item_id, item.in_flight, item.mode) for item in model.items
        ]
        assert queue.ready_at() == model.ready_at()
        for probe in range(clock + 1):
            found = queue.find(f"item-{probe}")
            assert (found.item_id if found else None) == next(
                (item.item_id for item in model.items if item.item_id == f"item-{probe}"), None
            )
