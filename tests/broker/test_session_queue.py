"""One session's queue: arrival order, cap and drop policies, dedupe, batches per mode."""

from __future__ import annotations

import pytest

from nexus.broker import (
    DropPolicy,
    QueuedMessage,
    QueueMode,
    QueueOverrides,
    QueueSettings,
    QueueSettingsError,
    SessionQueue,
    Wait,
    parse_drop_policy,
    parse_mode,
    resolve_settings,
)
from nexus.broker.session_queue import COLLECT_TITLE, Batch, owed_summary, summary_line


def msg(
    n: int, mode: QueueMode = "followup", *, at: int | None = None, debounce: int = 0, **kw: object
) -> QueuedMessage:
    return QueuedMessage(
        item_id=f"item-{n}",
        message_id=f"msg-{n}",
        prompt=f"prompt {n}",
        mode=mode,
        enqueued_at_ms=n * 10 if at is None else at,
        debounce_ms=debounce,
        **kw,  # type: ignore[arg-type]
    )


def test_modes_and_aliases() -> None:
    assert parse_mode("steer+backlog") == "steer-backlog"
    assert parse_mode(" Coalesce ") == "collect"
    assert parse_mode("abort") == "interrupt"
    with pytest.raises(QueueSettingsError, match=r"unknown queue mode 'later'.*steer, followup"):
        parse_mode("later")
    with pytest.raises(QueueSettingsError, match="unknown drop policy 'random'"):
        parse_drop_policy("random")


def test_settings_validate_their_values() -> None:
    with pytest.raises(QueueSettingsError, match="cap must be at least 1"):
        QueueSettings(cap=0)
    with pytest.raises(QueueSettingsError, match="debounce_ms must be 0 or more"):
        QueueSettings(debounce_ms=-1)


def test_settings_resolve_per_field_most_specific_first() -> None:
    message = QueueOverrides(mode="collect")
    session = QueueOverrides(cap=5, mode="followup")
    agent = QueueOverrides(debounce_ms=250, cap=9)
    resolved = resolve_settings(message, session, agent, None)
    assert resolved == QueueSettings(mode="collect", debounce_ms=250, cap=5, drop_policy="summarize")
    assert resolve_settings() == QueueSettings()


def test_settings_that_override_nothing_resolve_to_the_default_itself() -> None:
    """The common send overrides nothing: its settings are the default object, none built per message."""
    default = QueueSettings(mode="collect", cap=7)
    assert resolve_settings(QueueOverrides(), None, QueueOverrides(), default=default) is default
    assert resolve_settings(QueueOverrides(cap=3), QueueOverrides(), default=default) == QueueSettings(
        mode="collect", cap=3
    )


def test_followups_run_one_per_turn_in_arrival_order() -> None:
    queue = SessionQueue()
    for n in range(3):
        assert queue.add(msg(n), QueueSettings()).accepted
    taken = []
    while (batch := queue.next_batch(now_ms=10_000)) is not None:
        assert not isinstance(batch, Wait)
        taken.append(batch.prompt)
        queue.complete(batch.item_ids)
    assert taken == ["prompt 0", "prompt 1", "prompt 2"]


def test_collect_waits_for_quiet_then_takes_all_in_one_prompt() -> None:
    queue = SessionQueue()
    queue.add(msg(1, "collect", at=100, debounce=1000, sender="ana"), QueueSettings())
    queue.add(msg(2, "collect", at=400, debounce=1000), QueueSettings())
    assert queue.next_batch(now_ms=1300) == Wait(until_ms=1400)
    batch = queue.next_batch(now_ms=1400)
    assert batch is not None and not isinstance(batch, Wait)
    assert batch.item_ids == ["item-1", "item-2"]
    assert batch.prompt == f"{COLLECT_TITLE}\n\n---\nQueued #1 (from ana)\nprompt 1\n\n---\nQueued #2\nprompt 2"


def test_collect_stops_at_a_different_mode_or_route() -> None:
    queue = SessionQueue()
    queue.add(msg(1, "collect"), QueueSettings())
    queue.add(msg(2, "collect", route="telegram:42"), QueueSettings())
    queue.add(msg(3, "collect"), QueueSettings())
    batch = queue.next_batch(now_ms=10_000)
    assert batch is not None and not isinstance(batch, Wait)
    assert batch.item_ids == ["item-1"]


def test_interrupt_takes_the_backlog_with_it_and_drops_nothing() -> None:
    queue = SessionQueue()
    queue.add(msg(1), QueueSettings())
    queue.add(msg(2, "collect"), QueueSettings())
    queue.add(msg(3, "interrupt"), QueueSettings())
    queue.add(msg(4), QueueSettings())
    batch = queue.next_batch(now_ms=10_000)
    assert batch is not None and not isinstance(batch, Wait)
    assert batch.item_ids == ["item-1", "item-2", "item-3"]
    assert batch.prompt.startswith(COLLECT_TITLE) and "Queued #3\nprompt 3" in batch.prompt
    queue.complete(batch.item_ids)
    assert [item.item_id for item in queue.waiting()] == ["item-4"]


def test_dedupe_by_message_id_and_route() -> None:
    queue = SessionQueue()
    assert queue.add(msg(1), QueueSettings()).accepted
    again = queue.add(msg(1), QueueSettings())
    assert not again.accepted and again.duplicate_of == "item-1"
    other_route = msg(1, route="sms:+1")
    assert queue.add(other_route, QueueSettings()).accepted


def test_cap_with_new_policy_refuses_the_incoming_message() -> None:
    queue = SessionQueue()
    settings = QueueSettings(cap=2, drop_policy="new")
    queue.add(msg(1), settings)
    queue.add(msg(2), settings)
    outcome = queue.add(msg(3), settings)
    assert not outcome.accepted and outcome.rejected_reason is not None and "full" in outcome.rejected_reason
    assert [item.item_id for item in queue.items] == ["item-1", "item-2"]


@pytest.mark.parametrize("policy", ["new", "old", "summarize"])
def test_an_interrupt_is_queued_past_the_cap_and_drops_nothing(policy: DropPolicy) -> None:
    """A full queue is when a user most needs to stop a run: the `new` policy refused the interrupt (a trial)."""
    queue = SessionQueue(overflow_owed=False)
    settings = QueueSettings(cap=2, drop_policy=policy)
    queue.add(msg(1), settings)
    queue.add(msg(2), settings)
    outcome = queue.add(msg(3, "interrupt"), settings)
    assert outcome.accepted and outcome.dropped == ()
    assert [item.item_id for item in queue.items] == ["item-1", "item-2", "item-3"] and not queue.overflow_owed
    assert not queue.add(msg(4), QueueSettings(cap=2, drop_policy="new")).accepted, "the cap holds for the others"


def test_cap_with_old_policy_drops_the_oldest_waiting_not_the_in_flight() -> None:
    queue = SessionQueue(overflow_owed=False)
    settings = QueueSettings(cap=2, drop_policy="old")
    queue.add(msg(1), settings)
    queue.mark_in_flight(["item-1"])
    queue.add(msg(2), settings)
    queue.add(msg(3), settings)
    outcome = queue.add(msg(4), settings)
    assert outcome.accepted and [item.item_id for item in outcome.dropped] == ["item-2"]
    assert [item.item_id for item in queue.items] == ["item-1", "item-3", "item-4"]
    assert not queue.overflow_owed  # 'old' leaves no summary


def test_summarize_policy_marks_the_summary_owed_and_the_batch_takes_the_block() -> None:
    """The queue only notes that a summary is owed; the drops themselves are marked in the ledger, and the batch
    runner takes them into the next turn (tests/broker/test_overflow_durable.py)."""
    queue = SessionQueue(overflow_owed=False)
    settings = QueueSettings(cap=2, drop_policy="summarize")
    queue.add(msg(1), settings)
    queue.add(QueuedMessage("item-2", "msg-2", "a  b\n\nc " + "x" * 300, "followup", 20), settings)
    assert not queue.overflow_owed
    queue.add(msg(3), settings)
    queue.add(msg(4), settings)
    assert queue.overflow_owed
    batch = queue.next_batch(now_ms=10_000)
    assert batch is not None and not isinstance(batch, Wait)
    assert batch.item_ids == ["item-3"] and batch.prompt == "prompt 3" and batch.overflow_summary is None
    summary = owed_summary([("prompt 1", 2), ("a  b\n\nc " + "x" * 300, 2)])
    assert summary is not None
    told = batch.with_overflow(summary)
    header, rest = told.prompt.split("\nSummary:\n", 1)
    assert header == "[Queue overflow] Dropped 2 messages due to cap."
    lines, prompt = rest.split("\n\n", 1)
    first, second = lines.splitlines()
    assert first == "- prompt 1"
    assert second.startswith("- a b c xxx") and second.endswith("…") and len(second) == 2 + 160
    assert prompt == "prompt 3" and told.overflow_summary == summary and told.item_ids == batch.item_ids


def test_summary_keeps_at_most_cap_lines_but_counts_every_drop() -> None:
    assert owed_summary([]) is None
    summary = owed_summary([(f"prompt {n}", 1) for n in range(1, 4)])
    assert summary == "[Queue overflow] Dropped 3 messages due to cap.\nSummary:\n- prompt 3"


def test_summary_line_is_cut_to_160_chars() -> None:
    line = summary_line("word " * 100)
    assert len(line) <= 160 and line.endswith("…")
    assert summary_line("short\n\ttext") == "short text"


def test_a_released_item_returns_to_its_place() -> None:
    queue = SessionQueue()
    for n in range(3):
        queue.add(msg(n, "steer"), QueueSettings())
    queue.mark_in_flight(["item-0"])  # steered into the run
    assert [item.item_id for item in queue.waiting()] == ["item-1", "item-2"]
    queue.release(["item-0"])  # the run returned the steer
    assert [item.item_id for item in queue.waiting()] == ["item-0", "item-1", "item-2"]


def test_clear_keeps_in_flight_items() -> None:
    queue = SessionQueue()
    queue.add(msg(1), QueueSettings())
    queue.add(msg(2), QueueSettings())
    queue.mark_in_flight(["item-1"])
    removed = queue.clear()
    assert [item.item_id for item in removed] == ["item-2"]
    assert [item.item_id for item in queue.items] == ["item-1"]


@pytest.mark.parametrize(
    ("consumed", "left"),
    [
        (["item-0", "item-1"], ["item-2", "item-3"]),  # the oldest: cut off the front
        (["item-1", "item-0"], ["item-2", "item-3"]),
        (["item-0", "item-2"], ["item-1", "item-3"]),  # a returned steer ahead of a later item
        (["item-3"], ["item-0", "item-1", "item-2"]),
        (["item-0", "item-9"], ["item-1", "item-2", "item-3"]),  # an id no longer queued
        (["item-0", "item-0"], ["item-1", "item-2", "item-3"]),
    ],
)
def test_completed_items_leave_the_rest_in_order(consumed: list[str], left: list[str]) -> None:
    queue = SessionQueue()
    for n in range(4):
        queue.add(msg(n), QueueSettings())
    queue.complete(consumed)
    assert [item.item_id for item in queue.items] == left


def test_an_item_retuned_to_interrupt_takes_the_backlog_before_it() -> None:
    """The store watcher loads another process's row before its own send resolves the mode: the mode
    it is given afterwards (``retune``) decides the next turn as if the item had arrived with it."""
    queue = SessionQueue()
    settings = QueueSettings()
    queue.add(msg(1), settings)
    queue.add(msg(2), settings)
    late = queue.find("item-2")
    assert late is not None
    queue.retune(late, "interrupt", 0)
    batch = queue.next_batch(1000)
    assert not isinstance(batch, Wait) and batch is not None
    assert batch.item_ids == ["item-1", "item-2"]
    queue.complete(batch.item_ids)
    queue.add(msg(3, "interrupt"), settings)
    queue.add(msg(4), settings)
    first = queue.find("item-3")
    assert first is not None
    queue.retune(first, "followup", 0)  # no interrupt left: the head alone
    batch = queue.next_batch(1000)
    assert batch is not None and not isinstance(batch, Wait) and batch.item_ids == ["item-3"]


def test_a_message_id_is_accepted_again_once_its_item_left_the_queue() -> None:
    queue = SessionQueue()
    settings = QueueSettings(cap=1, drop_policy="old")
    assert queue.add(msg(1), settings).accepted
    assert queue.add(msg(1), settings).duplicate_of == "item-1"
    assert queue.add(msg(2), settings).dropped[0].item_id == "item-1"  # the cap pushed it out
    assert queue.find("item-1") is None
    again = QueuedMessage("item-9", "msg-1", "prompt again", "followup", 90)
    assert queue.add(again, settings).accepted and queue.find("item-9") is again


def _drain_batches(queue: SessionQueue) -> list[list[str]]:
    """The batches the queue hands out one after the other, each consumed before the next."""
    batches = []
    while (batch := queue.next_batch(now_ms=10**9)) is not None:
        assert not isinstance(batch, Wait)
        batches.append(batch.item_ids)
        queue.complete(batch.item_ids)
    return batches


def test_a_collect_batch_a_crash_cut_is_bisected_and_runs_alone_at_its_last_attempt() -> None:
    """The mates of a message that kills its process must not spend their attempts beside it."""
    queue = SessionQueue()
    for n in range(5):
        queue.restore(msg(n, "collect", cut_runs=1))  # one crash cut their batch
    queue.restore(msg(5, "collect"))  # arrived since: no suspect
    assert _drain_batches(queue) == [["item-0", "item-1", "item-2"], ["item-3", "item-4"], ["item-5"]]
    queue = SessionQueue()
    for n in range(3):
        queue.restore(msg(n, "collect", cut_runs=2, last_attempt=True))
    assert _drain_batches(queue) == [["item-0"], ["item-1"], ["item-2"]]
    queue = SessionQueue()
    for n in range(3):
        queue.restore(msg(n, "collect"))  # no crash: one batch as before
    assert _drain_batches(queue) == [["item-0", "item-1", "item-2"]]
    queue = SessionQueue()
    for n, mode in enumerate(("followup", "followup", "interrupt")):
        queue.restore(msg(n, mode, cut_runs=1))  # type: ignore[arg-type]
    assert _drain_batches(queue) == [["item-0", "item-1"], ["item-2"]]  # an interrupt's backlog too


def test_a_restored_item_takes_its_place_in_arrival_order_among_the_items_handed_to_a_run() -> None:
    """A cut run's item, taken over from a dead broker after later messages were adopted, runs before them
    (the full-size fault bench saw it run after four later followups)."""
    queue = SessionQueue()
    for n in (1, 3, 4):
        queue.restore(msg(n))
    queue.mark_in_flight(["item-1"])  # handed to a run: it keeps its place
    queue.restore(msg(2))
    queue.restore(msg(0))
    assert [item.item_id for item in queue.items] == ["item-0", "item-1", "item-2", "item-3", "item-4"]
    assert queue.restored is not None and queue.restored.item_id == "item-0"
    queue.restore(msg(5))
    assert queue.items[-1].item_id == "item-5" and queue.restored is queue.items[-1]
    queue.complete(["item-1"])  # the run consumed its batch: the older item is the next turn
    batch = queue.next_batch(now_ms=10**6)
    assert isinstance(batch, Batch) and batch.item_ids == ["item-0"]


@pytest.mark.parametrize("mode", ["followup", "collect", "interrupt"])
def test_an_item_restored_while_a_later_batch_waits_for_its_lease_is_the_head_once_that_batch_goes_back(
    mode: QueueMode,
) -> None:
    """A takeover's sweep loads a dead holder's cut item while this broker's batch of later items waits for the
    session's lease; the takeover then hands that batch back. The older item must lead the next batch (kept
    behind the batch, the bench's interrupt session ran ten later messages before it)."""
    queue = SessionQueue()
    for n in (3, 4, 5):
        queue.restore(msg(n, mode))
    first = queue.next_batch(now_ms=10**6)
    assert isinstance(first, Batch)
    queue.restore(msg(1, mode))  # the sweep, while the batch is being claimed
    queue.restore(msg(2, mode))
    queue.release(first.item_ids)  # the lease came with a takeover: the batch goes back, nothing ran
    batch = queue.next_batch(now_ms=10**6)
    assert isinstance(batch, Batch) and batch.item_ids[0] == "item-1"
    assert [item.item_id for item in queue.items] == [f"item-{n}" for n in range(1, 6)]
