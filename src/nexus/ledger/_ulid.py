"""A tiny ULID generator: 48-bit Unix ms + 80 random bits, Crockford base32, monotonic within a ms.

Own code instead of a dependency because the ledger needs exactly one function and
monotonicity inside one millisecond (ids made in the same ms still sort in creation order).
"""

from __future__ import annotations

import operator
import os
import threading
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_PAIRS: list[str] = list(map(operator.add, "".join([digit * 32 for digit in _ALPHABET]), _ALPHABET * 32))
"""Every two-digit string, indexed by its 10-bit value (joined by ``map`` in C: a Python loop cost ~0.5 M instructions
of every process that makes ids)."""
_RANDOM_DIGITS = _ALPHABET.encode() * 8
"""A random byte's digit: its low 5 bits, the alphabet 8 times over 256 entries (so every digit is as likely)."""
_FIRST_DIGITS = _ALPHABET[:16].encode() * 16
"""The first random digit's: 4 bits, so the random part's top bit is clear and leaves room to count up."""
_VALUES = {digit: value for value, digit in enumerate(_ALPHABET)}
_lock = threading.Lock()
_last_ms = -1
_prefix = ""
"""The 10 digits of ``_last_ms`` and the first 14 random digits: the ids after the first of a millisecond count up
from it, so they differ in the last two digits alone until those carry."""
_low = 0
"""The value of the last id's last two digits (its random part's low 10 bits)."""


def _encode_time(ms: int) -> str:
    """The first 10 Crockford base32 digits of a ULID: its 48-bit millisecond time."""
    pairs = _PAIRS
    return pairs[(ms >> 40) & 1023] + pairs[(ms >> 30) & 1023] + pairs[(ms >> 20) & 1023] + pairs[
        (ms >> 10) & 1023] + pairs[ms & 1023]  # fmt: skip


def new_ulid() -> str:
    """Return a new 26-character ULID, strictly greater than every earlier one from this process.

    The first id of a millisecond takes its 16 random digits straight from 16 random bytes (one table lookup
    each, in C); the ids after it in that millisecond count up in the last two digits. Drawing 80 random bits
    as one integer and cutting it into digits with shifts was ~9,000 of the ~25,000 instructions an id cost,
    and outside a burst every id is the first of its millisecond (a broker send makes one or two).
    """
    global _low
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms <= _last_ms:  # the same millisecond (or the clock went back): count up from the last id
            low = _low + 1
            if low < 1024:
                _low = low
                return _prefix + _PAIRS[low]
            return _carried()
        return _first_of(ms)


def _first_of(ms: int) -> str:
    """The first id of millisecond ``ms``: its 16 random digits straight from 16 random bytes. Lock held."""
    global _last_ms, _prefix, _low
    raw = os.urandom(16)
    _last_ms, _low = ms, (raw[14] & 31) << 5 | raw[15] & 31
    _prefix = (
        _encode_time(ms) + raw[:1].translate(_FIRST_DIGITS).decode() + raw[1:14].translate(_RANDOM_DIGITS).decode()
    )
    return _prefix + _PAIRS[_low]


def _carried() -> str:
    """The next id when the last two digits carry (over 1,000 ids in one millisecond): the 14 digits above count up
    by one; past 80 bits (never, in practice) the next millisecond starts from fresh random digits. Lock held."""
    global _prefix, _low
    high = 0
    for digit in _prefix[10:]:
        high = high * 32 + _VALUES[digit]
    high += 1
    if high >> 70:
        return _first_of(_last_ms + 1)
    _prefix = _prefix[:10] + "".join([_PAIRS[(high >> shift) & 1023] for shift in range(60, -1, -10)])
    _low = 0
    return _prefix + _PAIRS[0]


def ulid_time_ms(ulid: str) -> int:
    """The Unix-ms timestamp encoded in a ULID."""
    value = 0
    for ch in ulid[:10]:
        value = value * 32 + _ALPHABET.index(ch)
    return value
