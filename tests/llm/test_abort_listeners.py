"""An abort signal's listeners: called once on abort, removable, and cheap to hold (a streaming model call adds
one and holds its remover for as long as it streams; a thousand calls stream at once in a busy process)."""

from __future__ import annotations

import sys

from nexus.llm import AbortSignal


def test_a_listener_is_called_once_on_abort_and_not_after_it_was_removed() -> None:
    signal, calls = AbortSignal(), []
    remove_kept = signal.add_listener(lambda: calls.append("kept"))
    remove_gone = signal.add_listener(lambda: calls.append("gone"))
    remove_gone()
    remove_gone()  # twice is harmless
    signal.abort("stop")
    signal.abort("again")
    assert calls == ["kept"]
    remove_kept()  # after the abort too


def test_a_listener_added_to_an_aborted_signal_is_called_at_once() -> None:
    signal, calls = AbortSignal(), []
    signal.abort()
    remove = signal.add_listener(lambda: calls.append("now"))
    remove()
    assert calls == ["now"]


def test_a_listeners_remover_is_one_small_object() -> None:
    remove = AbortSignal().add_listener(lambda: None)
    closure = getattr(remove, "__closure__", None) or ()
    held = sys.getsizeof(remove) + (sys.getsizeof(closure) + sum(map(sys.getsizeof, closure)) if closure else 0)
    assert held <= 100, f"{held} bytes held by a remover (a closure and its cells were ~290)"
