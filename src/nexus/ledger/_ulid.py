"""A tiny ULID generator: 48-bit Unix ms + 80 random bits, Crockford base32, monotonic within a ms.

Own code instead of a dependency because the ledger needs exactly one function and
monotonicity inside one millisecond (ids made in the same ms still sort in creation order).
"""

from __future__ import annotations

import os
import threading
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_PAIRS = [a + b for a in _ALPHABET for b in _ALPHABET]
"""Every two-digit string, indexed by its 10-bit value."""
_HIGH_SHIFTS = range(70, 9, -10)
"""The 80 random bits are 8 two-digit pairs (the 48-bit time is the first 10 digits: 2 pad bits + 48); these
are the first 7."""
_lock = threading.Lock()
_last_ms = -1
_last_rand = 0
_prefix = ""
"""The 10 digits of ``_last_ms``: ids made in the same millisecond (a busy broker makes ~10) share them."""
_high = -1
_high_digits = ""
"""The first 14 random digits (``_last_rand >> 10``) and their text: the ids after the first of a millisecond
count up from it, so they differ in the last two digits alone until those carry."""


def _encode_time(ms: int) -> str:
    """The first 10 Crockford base32 digits of a ULID: its 48-bit millisecond time."""
    pairs = _PAIRS
    return pairs[(ms >> 40) & 1023] + pairs[(ms >> 30) & 1023] + pairs[(ms >> 20) & 1023] + pairs[
        (ms >> 10) & 1023] + pairs[ms & 1023]  # fmt: skip


def new_ulid() -> str:
    """Return a new 26-character ULID, strictly greater than every earlier one from this process.

    Two-digit table lookups, and the digits kept while they stay the same (the time's for the millisecond,
    the random part's but the last two for the ids after the first in it): encoding digit by digit was
    ~5 us per id, and a broker send makes one or two.
    """
    global _last_ms, _last_rand, _prefix, _high, _high_digits
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms <= _last_ms:
            ms = _last_ms
            rand = _last_rand + 1
            if rand >> 80:
                ms += 1
                rand = int.from_bytes(os.urandom(10), "big") >> 1
        else:
            rand = int.from_bytes(os.urandom(10), "big") >> 1  # top bit clear leaves room to increment
        if ms != _last_ms:
            _prefix, _high = _encode_time(ms), -1
        _last_ms, _last_rand = ms, rand
        if rand >> 10 != _high:
            _high = rand >> 10
            _high_digits = _prefix + "".join([_PAIRS[(rand >> shift) & 1023] for shift in _HIGH_SHIFTS])
        return _high_digits + _PAIRS[rand & 1023]


def ulid_time_ms(ulid: str) -> int:
    """The Unix-ms timestamp encoded in a ULID."""
    value = 0
    for ch in ulid[:10]:
        value = value * 32 + _ALPHABET.index(ch)
    return value
