"""sqlite-vec's ``vec0`` KNN over a file of float32 vectors, timed (run by bench_routing.py --vec).

Run with any Python whose ``sqlite3`` can load extensions (a pyenv build without
``--enable-loadable-sqlite-extensions`` cannot): ``python vec_probe.py VECTORS DIM QUERIES``.
Prints ``p50 p99`` in ms. Standard library plus the ``sqlite_vec`` package only.
"""

from __future__ import annotations

import sqlite3
import sys
import time

import sqlite_vec


def main() -> None:
    path, dim, queries = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with open(path, "rb") as f:
        raw = f.read()
    size = dim * 4
    rows = [raw[i : i + size] for i in range(0, len(raw), size)]
    conn = sqlite3.connect(":memory:")
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    conn.execute(f"CREATE VIRTUAL TABLE v USING vec0(embedding float[{dim}])")
    conn.executemany("INSERT INTO v (rowid, embedding) VALUES (?, ?)", ((i + 1, r) for i, r in enumerate(rows)))
    took = []
    for q in range(queries):
        vector = rows[(q * 7919) % len(rows)]
        started = time.perf_counter()
        conn.execute("SELECT rowid, distance FROM v WHERE embedding MATCH ? AND k = 40", (vector,)).fetchall()
        took.append((time.perf_counter() - started) * 1000)
    took.sort()
    print(f"{took[len(took) // 2]:.3f} {took[int(len(took) * 0.99)]:.3f}")


if __name__ == "__main__":
    main()
