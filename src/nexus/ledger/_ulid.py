"""A tiny ULID generator: 48-bit Unix ms + 80 random bits, Crockford base32, monotonic within a ms.

Own code instead of a dependency because the ledger needs exactly one function and
monotonicity inside one millisecond (ids made in the same ms still sort in creation order).
"""

from __future__ import annotations

import os
import threading
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_lock = threading.Lock()
_last_ms = -1
_last_rand = 0


def _encode(value: int) -> str:
    chars = []
    for _ in range(26):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def new_ulid() -> str:
    """Return a new 26-character ULID, strictly greater than every earlier one from this process."""
    global _last_ms, _last_rand
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
        _last_ms, _last_rand = ms, rand
    return _encode((ms << 80) | rand)


def ulid_time_ms(ulid: str) -> int:
    """The Unix-ms timestamp encoded in a ULID."""
    value = 0
    for ch in ulid[:10]:
        value = value * 32 + _ALPHABET.index(ch)
    return value
