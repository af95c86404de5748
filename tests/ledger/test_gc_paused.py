"""``gc_paused`` pauses the cyclic GC for a block and puts back the state it found, even when the block raises."""

from __future__ import annotations

import gc

import pytest

from nexus.ledger._decode import gc_paused


def test_the_collector_is_paused_inside_and_restored_after() -> None:
    was = gc.isenabled()
    try:
        gc.enable()
        with gc_paused():
            assert not gc.isenabled()
            with gc_paused():  # nested: the inner one found it paused and leaves it paused
                assert not gc.isenabled()
            assert not gc.isenabled()
        assert gc.isenabled()
        with pytest.raises(ValueError), gc_paused():
            raise ValueError("the block's error goes through")
        assert gc.isenabled()
        gc.disable()
        with gc_paused():
            pass
        assert not gc.isenabled()  # found disabled: left disabled
    finally:
        (gc.enable if was else gc.disable)()
