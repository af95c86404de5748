"""Sessions of the evaluation set: databases and migrations, CI and builds, data pipelines."""

from __future__ import annotations

from spec import E, Sess, T

SESSIONS = [
    Sess(
        "orders-index",
        "backend",
        "billing-db",
        38,
        [
            E(
                "orders index",
                [
                    T(
                        "Listing a customer's orders takes 4 seconds; add the missing index",
                        "EXPLAIN showed a seq scan on orders(customer_id, created_at); added migration 0107 creating the "
                        "index CONCURRENTLY.",
                        reads="db/queries/orders.sql",
                        writes="db/migrations/0107_orders_customer_idx.sql",
                    ),
                    T(
                        "The migration must not lock the table in production",
                        "Split it: CREATE INDEX CONCURRENTLY outside a transaction, with a lock_timeout and a retry note.",
                        writes="db/migrations/0107_orders_customer_idx.sql db/migrate.py",
                    ),
                ],
                [
                    "finish the concurrent index on the orders table so the customer order history query is fast",
                    "the orders customer_id index migration needs a rollback script",
                ],
            ),
        ],
        fresh_twin=None,
    ),
    Sess(
        "orders-index-wt",
        "backend",
        "billing-db-experiment",
        6,
        [
            E(
                "orders index again",
                [
                    T(
                        "Customer order history is slow, add an index on orders for customer and date",
                        "Seq scan on orders; wrote migration 0107 with CREATE INDEX CONCURRENTLY on (customer_id, created_at).",
                        reads="db/queries/orders.sql",
                        writes="db/migrations/0107_orders_customer_idx.sql db/migrate.py",
                    ),
                ],
                [
                    "the index for listing orders by customer: make sure it is built concurrently and add the down migration",
                    "continue the orders (customer_id, created_at) index migration",
                ],
            ),
        ],
        stale=True,
        fresh_twin="orders-index",
    ),
    Sess(
        "blog-postgres",
        "backend",
        "blog",
        30,
        [
            E(
                "sqlite to postgres",
                [
                    T(
                        "Move the blog from SQLite to Postgres",
                        "Added a Postgres DATABASE_URL, psycopg, and a one-off copy script (scripts/sqlite_to_pg.py) that "
                        "copies tables in dependency order.",
                        reads="blog/db.py",
                        writes="blog/db.py scripts/sqlite_to_pg.py",
                    ),
                    T(
                        "The copy fails on posts with emoji in the title",
                        "The SQLite file had latin-1 mojibake rows; the script now decodes with a fallback and reports rows it fixed.",
                        writes="scripts/sqlite_to_pg.py",
                    ),
                    T(
                        "Reset the Postgres sequences after the copy",
                        "After copying, setval() each serial column to max(id); new posts no longer hit duplicate keys.",
                        writes="scripts/sqlite_to_pg.py",
                    ),
                ],
                [
                    "keep going with moving the blog database off sqlite: comments table copy is missing",
                    "after migrating the blog to postgres new posts get duplicate key errors sometimes; look at the sequences again",
                ],
            ),
        ],
    ),
    Sess(
        "alembic-heads",
        "backend",
        "shop-api",
        16,
        [
            E(
                "multiple heads",
                [
                    T(
                        "alembic upgrade fails with 'multiple head revisions are present'",
                        "Two feature branches both added revisions on top of 3c1f; created a merge revision 9ad2 joining them.",
                        reads="alembic/versions/3c1f_add_coupons.py",
                        writes="alembic/versions/9ad2_merge_heads.py",
                    ),
                ],
                [
                    "alembic complains again about several head revisions after the coupons branch merged; continue the merge revision work",
                ],
            ),
            E(
                "ci check heads",
                [
                    T(
                        "Add a CI step that fails when alembic has more than one head",
                        "Added scripts/check_alembic_heads.sh, run in the test workflow.",
                        writes="scripts/check_alembic_heads.sh .github/workflows/test.yml",
                    ),
                ],
                [
                    "the pipeline check for a single alembic head should print which revisions conflict",
                ],
            ),
        ],
    ),
    Sess(
        "dashboard-slow-query",
        "data",
        "analytics",
        12,
        [
            E(
                "explain analyze",
                [
                    T(
                        "The sales dashboard times out on the 'by region' chart",
                        "EXPLAIN ANALYZE: a nested loop over 40M events joined to stores. Rewrote it as a pre-aggregated "
                        "daily_sales_by_region materialized view.",
                        reads="dashboard/queries/by_region.sql",
                        writes="db/views/daily_sales_by_region.sql dashboard/queries/by_region.sql",
                    ),
                    T(
                        "Refresh the materialized view every hour without blocking readers",
                        "REFRESH MATERIALIZED VIEW CONCURRENTLY with a unique index; scheduled hourly.",
                        writes="db/views/daily_sales_by_region.sql jobs/refresh_views.py",
                    ),
                ],
                [
                    "the regional sales chart is slow again at month start; continue with the materialized view refresh",
                    "keep working on the by-region dashboard query: the hourly concurrent refresh fails without a unique index",
                ],
            ),
        ],
    ),
    Sess(
        "flaky-tests",
        "devops",
        "shop-api",
        29,
        [
            E(
                "retry flaky",
                [
                    T(
                        "CI fails randomly on test_checkout_concurrency; can we retry flaky tests?",
                        "Added pytest-rerunfailures with --reruns 2 only for tests marked @pytest.mark.flaky.",
                        reads=".github/workflows/test.yml",
                        writes=".github/workflows/test.yml pyproject.toml",
                    ),
                ],
                [
                    "the checkout concurrency test still breaks the build now and then; carry on with the rerun setup for flaky tests",
                ],
            ),
            E(
                "fix the race",
                [
                    T(
                        "Actually fix test_checkout_concurrency instead of retrying it",
                        "The test shared one DB transaction across threads; now each thread uses its own session and the "
                        "stock decrement uses SELECT ... FOR UPDATE.",
                        reads="tests/test_checkout.py",
                        writes="tests/test_checkout.py checkout/stock.py",
                    ),
                ],
                [
                    "stock decrement under concurrent checkouts: the row lock fix for the test, continue there",
                    "now that the checkout race is fixed properly, remove the flaky marker from that test",
                ],
            ),
        ],
    ),
    Sess(
        "docker-slim",
        "devops",
        "shop-api",
        23,
        [
            E(
                "multistage build",
                [
                    T(
                        "The API Docker image is 1.9 GB; make it smaller",
                        "Multi-stage Dockerfile: build wheels in python:3.12 then copy into python:3.12-slim; 1.9 GB -> 240 MB.",
                        reads="Dockerfile",
                        writes="Dockerfile .dockerignore",
                    ),
                    T(
                        "The slim image lacks libpq at run time",
                        "Installed libpq5 in the runtime stage only, build deps stay in the builder stage.",
                        writes="Dockerfile",
                    ),
                ],
                [
                    "shrink the api container further: can we drop the pip cache layer in the multi-stage dockerfile",
                    "the slim runtime image is missing another shared library for pillow; continue with the Dockerfile",
                ],
            ),
        ],
    ),
    Sess(
        "release-pipeline",
        "devops",
        "sdk-python",
        17,
        [
            E(
                "semantic release",
                [
                    T(
                        "Automate releases: bump the version from conventional commits and publish to PyPI",
                        "Added a release workflow (python-semantic-release), trusted publishing to PyPI, tags vX.Y.Z.",
                        writes=".github/workflows/release.yml pyproject.toml",
                    ),
                    T(
                        "Generate the changelog from the commits too",
                        "CHANGELOG.md is now generated per release with feat/fix/breaking sections.",
                        writes=".github/workflows/release.yml CHANGELOG.md",
                    ),
                ],
                [
                    "the automatic version bump treated a 'feat!:' commit as minor, it should be a major release; continue the release workflow",
                    "publish the sdk to test pypi first in the release pipeline before the real upload",
                ],
            ),
        ],
    ),
    Sess(
        "precommit",
        "devops",
        "sdk-python",
        35,
        [
            E(
                "ruff hooks",
                [
                    T(
                        "Set up pre-commit with ruff and ruff-format for the SDK",
                        "Added .pre-commit-config.yaml with ruff (lint + format) and a ruff section in pyproject.toml.",
                        writes=".pre-commit-config.yaml pyproject.toml",
                    ),
                    T(
                        "Add mypy to the hooks but only for the src directory",
                        "Added the mirrors-mypy hook with files: ^src/ and the stubs it needs.",
                        writes=".pre-commit-config.yaml",
                    ),
                ],
                [
                    "the git hooks for the sdk: mypy in pre-commit cannot find the types-requests stubs",
                    "continue on the pre-commit configuration, run the ruff formatter on notebooks too",
                ],
            ),
        ],
    ),
    Sess(
        "precommit-wt",
        "devops",
        "sdk-python-wt",
        4,
        [
            E(
                "ruff hooks redo",
                [
                    T(
                        "Add pre-commit hooks with ruff lint and format to the python sdk",
                        "Wrote .pre-commit-config.yaml with ruff and ruff-format; configured ruff in pyproject.toml.",
                        writes=".pre-commit-config.yaml pyproject.toml",
                    ),
                ],
                [
                    "ruff via pre-commit for the sdk: also add the mypy hook restricted to src",
                    "keep going with the sdk's pre-commit hooks setup",
                ],
            ),
        ],
        stale=True,
        fresh_twin="precommit",
    ),
    Sess(
        "s3-etl",
        "data",
        "warehouse",
        40,
        [
            E(
                "nightly load",
                [
                    T(
                        "Load the nightly CSV exports from S3 into the warehouse",
                        "Wrote etl/load_orders.py: lists s3://exports/orders/YYYY-MM-DD/, streams CSVs, COPY into staging.orders.",
                        writes="etl/load_orders.py etl/config.yaml",
                    ),
                    T(
                        "The same rows show up twice when a file is re-uploaded",
                        "Staging rows carry the file's ETag; merge into orders with a unique (order_id) and skip known files.",
                        writes="etl/load_orders.py etl/merge_orders.sql",
                    ),
                ],
                [
                    "duplicate orders in the warehouse again after the nightly S3 import; continue with the dedupe on merge",
                    "the csv import from the exports bucket should skip files it already loaded, keep going on that",
                ],
            ),
        ],
    ),
    Sess(
        "kafka-lag",
        "data",
        "events",
        13,
        [
            E(
                "consumer lag",
                [
                    T(
                        "The event ingestion consumer is hours behind on the clicks topic",
                        "Consumer commits after every message; switched to batch polling (max.poll.records=500) and async "
                        "commits; lag drops in 20 min.",
                        reads="ingest/consumer.py",
                        writes="ingest/consumer.py",
                    ),
                    T(
                        "Scale the consumers: the topic has 6 partitions but we run 2 consumers",
                        "Deployment now runs 6 replicas in one consumer group; added a lag alert.",
                        writes="deploy/ingest.yaml ingest/consumer.py",
                    ),
                ],
                [
                    "kafka lag on the clicks stream is growing again; continue tuning the ingestion consumer group",
                    "the batch commit change in the event consumer can lose messages on rebalance; fix that",
                ],
            ),
        ],
    ),
    Sess(
        "pandas-memory",
        "data",
        "reports",
        26,
        [
            E(
                "memory blowup",
                [
                    T(
                        "The quarterly report job gets OOM-killed in pandas",
                        "read_csv loaded 12 GB of object columns; now reads in chunks with categorical dtypes and aggregates "
                        "per chunk; peak memory 1.1 GB.",
                        reads="reports/quarterly.py",
                        writes="reports/quarterly.py",
                    ),
                ],
                [
                    "the quarter report dataframe still uses too much RAM for the largest customer; carry on with chunked reading",
                    "continue with the pandas memory fix of the quarterly job: convert the string columns to categories",
                ],
            ),
        ],
    ),
    Sess(
        "pandas-memory-wt",
        "data",
        "reports-wt",
        3,
        [
            E(
                "memory again",
                [
                    T(
                        "quarterly report runs out of memory in pandas, make it stream",
                        "Changed reports/quarterly.py to chunked read_csv with category dtypes and incremental groupby.",
                        reads="reports/quarterly.py",
                        writes="reports/quarterly.py",
                    ),
                ],
                [
                    "the quarterly pandas job still OOMs: keep going with chunked processing",
                ],
            ),
        ],
        stale=True,
        fresh_twin="pandas-memory",
    ),
    Sess(
        "airflow-backfill",
        "data",
        "warehouse",
        8,
        [
            E(
                "dag retries",
                [
                    T(
                        "The Airflow DAG for the warehouse load fails on transient S3 errors",
                        "Set retries=3 with exponential backoff on the load task and made the task idempotent per run date.",
                        reads="dags/warehouse_load.py",
                        writes="dags/warehouse_load.py",
                    ),
                ],
                [
                    "warehouse load dag: make the retry delay configurable per task",
                ],
            ),
            E(
                "backfill",
                [
                    T(
                        "Backfill March for the warehouse load DAG",
                        "Ran airflow dags backfill with max_active_runs=2; documented the command in docs/backfill.md.",
                        writes="docs/backfill.md dags/warehouse_load.py",
                    ),
                ],
                [
                    "we also need to backfill april for the warehouse DAG, continue from the march backfill",
                    "backfills hammer the database; limit concurrency of the warehouse dag backfill runs further",
                ],
            ),
        ],
    ),
]
