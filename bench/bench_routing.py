"""Smart routing: accuracy on the evaluation set beside three baselines, and decision/indexing speed.

    python bench/bench_routing.py                 # accuracy + speed at 10,000 and 100,000 checkpoints
    python bench/bench_routing.py --quick         # accuracy + speed at 2,000 (a smoke run)
    python bench/bench_routing.py --fit           # fit the model on the dev split, write model.json, then report
    python bench/bench_routing.py --vec           # also sqlite-vec's vec0 against numpy brute force
    python bench/bench_routing.py --cv 4 --no-speed  # dev only, 5-fold cross-validated (4 fold assignments)
    python bench/bench_routing.py --embedder openai --embedding-base-url http://127.0.0.1:8080/v1 \
        --embedding-model all-MiniLM-L6-v2 --fit --model-out minilm.json --no-speed   # another embedder
    python bench/bench_routing.py ... --model minilm.json --misses   # a model fitted before; the misses

The evaluation set (bench/routing_eval/, README there) is built afresh in a temporary directory and
indexed turn by turn as a live system would; the router and the baselines (recency only, BM25 only,
embeddings only) answer the same tasks in the same run. The router also decides each task within one
agent's work (the agent holding its checkpoint, and each other agent, where ``new`` is right): the table
"Within one agent's work", cross-validated too under ``--cv``. Thresholds and the model are fitted on the
dev split only; the tables report the held-out test split (and dev for reference).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "routing_eval"))

from _machine import header, load_line  # noqa: E402
from build import build  # noqa: E402
from evaluate import (  # noqa: E402
    Metrics,
    baselines,
    expected_calibration_error,
    metrics,
    print_misses,
    reliability,
    run_baseline,
    run_router,
    run_scoped,
)
from fit import FOLDS, blank_model, cross_validated, fit_model  # noqa: E402
from scale import build_scale  # noqa: E402


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def accuracy(args: argparse.Namespace) -> None:
    from nexus.ledger import Ledger

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        ledger = Ledger.open(home / "agents.db")
        router = _open_router(ledger, args, blank=bool(args.fit or args.cv))
        print(f"embedder: {router.guard.embedder.name if router.guard.embedder else 'none (lexical only)'}")
        costs: list[float] = []

        def on_turn(_turn_id: str) -> None:
            started = time.perf_counter()
            router.catch_up()
            costs.append((time.perf_counter() - started) * 1000)

        evalset = build(home, on_turn=on_turn)
        tasks = evalset.tasks
        print(
            f"\n## Evaluation set: {evalset.sessions} sessions, {evalset.forks} forks, {evalset.turns} turns, "
            f"{len(tasks)} tasks ({sum(t.split == 'dev' for t in tasks)} dev / "
            f"{sum(t.split == 'test' for t in tasks)} test), {sum(t.expected is None for t in tasks)} new"
        )
        print(
            f"indexing each turn as it is written: median {statistics.median(costs[1:]):.2f} ms, "
            f"p99 {_pct(costs[1:], 0.99):.2f} ms (the first, {costs[0]:.0f} ms, loads the embedder)"
        )
        if args.fit:
            model = fit_model(router, [t for t in tasks if t.split == "dev"])
            out = Path(args.model_out) if args.model_out else HERE.parent / "src/nexus/routing/model.json"
            out.write_text(json.dumps(model.to_json(), indent=1) + "\n")
            router.model = model
            print(f"fitted on dev and written to {out}: threshold {model.threshold:.3f}")
        if args.cv:
            _cross_validation(router, [t for t in tasks if t.split == "dev"], args.cv, args.misses)
            return
        answers, _ = run_router(router, tasks)
        if args.misses:
            print_misses(router, [t for t in tasks if t.split == "dev"], answers, "dev, decided by the model in use")
        methods = {"router": answers} | {name: run_baseline(rank, tasks) for name, rank in baselines(router).items()}
        for split in ("test", "dev"):
            chosen = [t for t in tasks if t.split == split]
            _table(split, {name: metrics(chosen, a) for name, a in methods.items()})
        _scoped_table(router, tasks)
        test = [t for t in tasks if t.split == "test"]
        rows = reliability(test, answers)
        print("\n### Router confidence on test (reliability)\n")
        print("| confidence | tasks | mean confidence | best checkpoint right |")
        print("|---|---|---|---|")
        for label, count, mean, hit in rows:
            print(f"| {label} | {count} | {mean:.2f} | {hit:.2f} |")
        print(f"\nexpected calibration error: {expected_calibration_error(rows):.3f}")
        router.close()
        ledger.close()


def _open_router(ledger: object, args: argparse.Namespace, *, blank: bool = False) -> Any:
    """The router of ``--embedder``, deciding with ``--model`` (or the shipped model; ``blank``: zeros, to fit)."""
    from nexus.routing import Router, RouteSettings
    from nexus.routing._model import load_model

    settings = RouteSettings(
        embedder=args.embedder,
        embedding_base_url=args.embedding_base_url,
        embedding_model=args.embedding_model,
        embedding_api_key_env="",
    )
    model = load_model(json.loads(Path(args.model).read_text())) if args.model else None
    return Router(ledger, settings, model=blank_model() if blank else model)


def _cross_validation(router: object, dev: list, seeds: int, misses: bool) -> None:
    """Dev decided fold by fold (``fit.cross_validated``): how a change is judged before the test split is seen."""
    answered, scoped = cross_validated(router, dev, seeds)
    if misses:
        print_misses(router, dev, answered[0], "dev, cross-validated (first fold assignment)")
    runs = [metrics(dev, answers) for answers in answered]
    print(f"\n### dev split, {FOLDS}-fold cross-validated, mean of {seeds} fold assignments (test not decided)\n")
    print("| top-1 | top-3 | decisions right | new precision | new recall | new F1 |")
    print("|---|---|---|---|---|---|")
    keys = ("top1", "top3", "accuracy", "new_p", "new_r", "new_f1")
    means = [statistics.mean(getattr(m, k) for m in runs) for k in keys]
    print("| " + " | ".join(f"{v:.3f}" for v in means) + " |")
    print("\nWithin one agent's work, cross-validated likewise (all fold assignments):\n")
    print("| own agent: tasks | right | other agents: tasks | new | mean confidence | highest |")
    print("|---|---|---|---|---|---|")
    print(f"| {scoped.row()} |")


def _scoped_table(router: object, tasks: list) -> None:
    """The router within one agent's work: the agent holding the task's checkpoint, and every other agent."""
    print("\n### Within one agent's work (router)\n")
    print("| split | own agent: tasks | right | other agents: tasks | new | mean confidence | highest |")
    print("|---|---|---|---|---|---|---|")
    for split in ("test", "dev"):
        print(f"| {split} | {run_scoped(router, [t for t in tasks if t.split == split]).row()} |")


def _table(split: str, results: dict[str, Metrics]) -> None:
    print(f"\n### {split} split\n")
    print(
        "| method | top-1 | top-3 | decisions right | new precision | new recall | new F1 | continue | branch | stale |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, m in results.items():
        kinds = " | ".join(f"{m.by_kind.get(k, 0.0):.2f}" for k in ("continue", "branch", "stale"))
        print(
            f"| {name} | {m.top1:.3f} | {m.top3:.3f} | {m.accuracy:.3f} | {m.new_p:.3f} | {m.new_r:.3f} | "
            f"{m.new_f1:.3f} | {kinds} |"
        )


def speed(n: int, args: argparse.Namespace) -> None:
    from nexus.ledger import Ledger

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        wrote = build_scale(home, n)
        ledger = Ledger.open(home / "agents.db")
        rss0 = _rss_mb()
        router = _open_router(ledger, args)
        started = time.perf_counter()
        router.catch_up()
        index_s = time.perf_counter() - started
        tasks = [t.text for t in build(home / "eval").tasks]
        for text in tasks[:5]:
            router.route(text)  # warm-up
        took, cpu = [], []
        for text in tasks:
            started, started_cpu = time.perf_counter(), time.thread_time()
            router.route(text)
            took.append((time.perf_counter() - started) * 1000)
            cpu.append((time.thread_time() - started_cpu) * 1000)
        embed = []
        for text in tasks:
            started = time.perf_counter()
            router.guard.embed([text])
            embed.append((time.perf_counter() - started) * 1000)
        per_10k = router.index.memory_bytes() / len(router.index) * 10_000 / 1e6
        print(f"\n### {len(router.index):,} checkpoints\n")
        print(
            f"- ledger written in {wrote:.1f} s; indexed in {index_s:.1f} s "
            f"({index_s / n * 1000:.2f} ms per turn in batches)"
        )
        print(
            "- decision (catch-up check, task embedding, BM25, vectors, scoring, record): "
            f"p50 {statistics.median(took):.2f} ms, "
            f"p99 {_pct(took, 0.99):.2f} ms, max {max(took):.2f} ms over {len(took)} tasks (of which embedding p50 "
            f"{statistics.median(embed):.2f} ms); CPU time of the deciding thread p50 {statistics.median(cpu):.2f} ms, "
            f"p99 {_pct(cpu, 0.99):.2f} ms"
        )
        print(
            f"- index memory: {per_10k:.1f} MB per 10,000 checkpoints (arrays and maps); process RSS "
            f"{_rss_mb() - rss0:.0f} MB more after opening the router (embedder model included)"
        )
        if args.vec:
            _vector_search(router, args.vec_python)
        router.close()
        ledger.close()


def _vector_search(router: object, vec_python: str) -> None:
    """Nearest 40 by numpy (einsum, as the router does) and by sqlite-vec's vec0, on the same vectors."""
    import numpy as np

    snap = router.index.snapshot()  # type: ignore[attr-defined]
    matrix = np.ascontiguousarray(snap.vectors[: snap.n])
    numpy_ms = []
    for q in range(200):
        query = matrix[(q * 7919) % snap.n]
        started = time.perf_counter()
        sims = np.einsum("ij,j->i", matrix, query)
        top = np.argpartition(-sims, 40)[:40]
        top[np.argsort(-sims[top])]
        numpy_ms.append((time.perf_counter() - started) * 1000)
    line = f"- nearest 40 by numpy: p50 {statistics.median(numpy_ms):.2f} ms, p99 {_pct(numpy_ms, 0.99):.2f} ms"
    try:
        import sqlite_vec
    except ImportError:
        print(line + "; sqlite-vec not installed (pip install sqlite-vec): not compared")
        return
    with tempfile.NamedTemporaryFile(suffix=".f32") as f:
        f.write(matrix.astype(np.float32).tobytes())
        f.flush()
        env = {**os.environ, "PYTHONPATH": str(Path(sqlite_vec.__file__).parent.parent)}
        probe = [vec_python, str(HERE / "routing_eval" / "vec_probe.py"), f.name, str(matrix.shape[1]), "200"]
        done = subprocess.run(probe, env=env, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        reason = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"
        print(line + f"; sqlite-vec not measured with {vec_python}: {reason}")
        return
    p50, p99 = (float(v) for v in done.stdout.split())
    print(
        line + f"; sqlite-vec vec0 ({vec_python}): p50 {p50:.2f} ms, p99 {p99:.2f} ms "
        f"(numpy {p50 / statistics.median(numpy_ms):.1f}x faster at the median, same run)"
    )


def _rss_mb() -> float:
    with open(f"/proc/{os.getpid()}/status", encoding="utf-8") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description="smart routing: accuracy beside baselines, and speed")
    parser.add_argument("--quick", action="store_true", help="speed at 2,000 checkpoints only")
    parser.add_argument("--fit", action="store_true", help="fit the model on the dev split and write model.json")
    parser.add_argument("--vec", action="store_true", help="compare sqlite-vec with numpy brute force")
    parser.add_argument(
        "--vec-python",
        default=sys.executable,
        help="a Python whose sqlite3 can load extensions, for the sqlite-vec side (default: this one)",
    )
    parser.add_argument("--sizes", default="", help="checkpoint counts for the speed part, e.g. 10000,100000")
    parser.add_argument("--no-speed", action="store_true", help="accuracy only")
    parser.add_argument("--embedder", default="wordllama", choices=("wordllama", "openai", "none"))
    parser.add_argument("--embedding-base-url", default="", help="for --embedder openai, e.g. http://127.0.0.1:8080/v1")
    parser.add_argument("--embedding-model", default="", help="for --embedder openai: the model name it is sent")
    parser.add_argument("--model", default="", help="a model.json to decide with (default: the shipped one)")
    parser.add_argument("--model-out", default="", help="where --fit writes (default: the shipped model.json)")
    parser.add_argument("--misses", action="store_true", help="print the tasks decided wrong, by kind")
    parser.add_argument(
        "--cv",
        type=int,
        default=0,
        metavar="SEEDS",
        help="only dev, cross-validated over SEEDS fold assignments (judge a change without the test split)",
    )
    args = parser.parse_args()
    print(header("bench_routing: smart routing accuracy and speed"))
    accuracy(args)
    if not args.no_speed and not args.cv:
        sizes = [int(s) for s in args.sizes.split(",") if s] or ([2000] if args.quick else [10_000, 100_000])
        print("\n## Speed")
        for n in sizes:
            speed(n, args)
    print()
    print(load_line())


if __name__ == "__main__":
    main()
