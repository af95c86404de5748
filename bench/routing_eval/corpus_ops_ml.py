"""Sessions of the evaluation set: infrastructure and observability, machine learning, odds and ends."""

from __future__ import annotations

from spec import E, Fork, Sess, T

SESSIONS = [
    Sess(
        "k8s-hpa",
        "devops",
        "infra",
        32,
        [
            E(
                "autoscaling",
                [
                    T(
                        "Autoscale the worker deployment on queue length, not CPU",
                        "Installed KEDA; a ScaledObject scales workers 2..20 on the RabbitMQ queue depth (target 100 per pod).",
                        reads="k8s/workers/deployment.yaml",
                        writes="k8s/workers/scaledobject.yaml",
                    ),
                    T(
                        "Workers scale down while they are still processing jobs",
                        "Added a preStop hook and terminationGracePeriodSeconds=300; the worker stops consuming on SIGTERM.",
                        writes="k8s/workers/deployment.yaml worker/main.py",
                    ),
                ],
                [
                    "pods of the queue workers get killed mid-job during scale-in; continue with graceful shutdown",
                    "keda scaling on rabbitmq depth reacts too slowly to spikes, tune the scaled object",
                ],
            ),
        ],
    ),
    Sess(
        "json-logging",
        "devops",
        "shop-api",
        21,
        [
            E(
                "structured logs",
                [
                    T(
                        "Switch the API to structured JSON logs with a request id",
                        "structlog with a JSON renderer; a middleware binds request_id (from X-Request-ID or new) to every log line.",
                        writes="api/logging.py api/middleware.py",
                    ),
                    T(
                        "Propagate the request id to the background jobs",
                        "The id is passed in job headers and bound in the worker, so one request's logs can be followed end to end.",
                        writes="worker/jobs.py api/logging.py",
                    ),
                ],
                [
                    "we lose the request correlation id when a celery task retries; continue the structured logging work",
                    "json log lines from the api should include the user id when logged in",
                ],
            ),
        ],
        forks=[
            Fork(
                0,
                "json-logging-otel",
                [
                    E(
                        "opentelemetry",
                        [
                            T(
                                "Use OpenTelemetry trace ids instead of our own request id",
                                "Added the OTel SDK with the FastAPI instrumentation; logs carry trace_id/span_id from the current span.",
                                writes="api/telemetry.py api/logging.py",
                            ),
                        ],
                        [
                            "continue the opentelemetry variant: export the traces to the collector over OTLP",
                            "trace ids from otel are missing in logs of background jobs; keep going on the tracing branch",
                        ],
                    ),
                ],
            ),
        ],
    ),
    Sess(
        "error-rate-alert",
        "devops",
        "infra",
        17,
        [
            E(
                "prometheus alert",
                [
                    T(
                        "Alert when the API 5xx rate is above 2% for 5 minutes",
                        'Added a PrometheusRule with rate(http_requests_total{code=~"5.."}[5m]) / rate(http_requests_total[5m]) '
                        "> 0.02, routed to the on-call channel.",
                        writes="monitoring/rules/api.yaml monitoring/alertmanager.yaml",
                    ),
                ],
                [
                    "the 5xx error ratio alert fires during deploys; add an inhibition or a longer for: clause",
                    "alerting on server errors: also page when the p99 latency is over 2 seconds",
                ],
            ),
        ],
    ),
    Sess(
        "tls-renewal",
        "devops",
        "infra",
        37,
        [
            E(
                "cert renewal",
                [
                    T(
                        "The TLS certificate of the nginx edge expired last night",
                        "Renewed with certbot; the renewal timer was disabled. Re-enabled it and added a deploy hook that reloads nginx.",
                        reads="nginx/edge.conf",
                        writes="nginx/edge.conf ops/certbot-deploy-hook.sh",
                    ),
                ],
                [
                    "make sure the letsencrypt certificate renewal reloads nginx; continue from the certbot hook",
                    "add monitoring for certificate expiry so it does not lapse again",
                ],
            ),
        ],
    ),
    Sess(
        "churn-model",
        "ml",
        "ml-churn",
        34,
        [
            E(
                "training script",
                [
                    T(
                        "Write a training script for the churn model from the customers table",
                        "train.py: features (tenure, plan, tickets, logins 30d), gradient boosting, AUC 0.81 on a time split.",
                        writes="churn/train.py churn/features.py",
                    ),
                    T(
                        "Only 4% of customers churn; the model predicts nobody churns",
                        "Used class weights and tuned the threshold on precision-recall; recall at 0.3 precision went from 0 to 0.62.",
                        writes="churn/train.py churn/evaluate.py",
                    ),
                ],
                [
                    "the churn classifier still has poor recall on the minority class; keep going with the imbalance handling",
                    "continue the churn model: calibrate the predicted probabilities before we pick the threshold",
                ],
            ),
        ],
    ),
    Sess(
        "feature-backfill",
        "ml",
        "ml-platform",
        15,
        [
            E(
                "feature store",
                [
                    T(
                        "Backfill 12 months of the 'logins_30d' feature into the feature store",
                        "Wrote a Spark job computing the rolling window per day and writing to the offline store partitioned by date.",
                        writes="features/backfill_logins.py",
                    ),
                ],
                [
                    "the logins rolling window backfill for the feature store double counts days at month boundaries",
                    "continue the offline feature backfill and then materialize it to the online store",
                ],
            ),
        ],
    ),
    Sess(
        "serving-latency",
        "ml",
        "ml-platform",
        6,
        [
            E(
                "dynamic batching",
                [
                    T(
                        "Model serving p99 is 900 ms under load",
                        "Added dynamic batching in serve/batcher.py (max 32 requests or 10 ms), p99 down to 140 ms.",
                        reads="serve/app.py",
                        writes="serve/batcher.py serve/app.py",
                    ),
                ],
                [
                    "the inference server batching adds 10 ms even at low traffic; make the batch window adaptive",
                    "continue the model serving latency work: warm up the model at start so the first batch is fast",
                ],
            ),
        ],
    ),
    Sess(
        "importer-cli",
        "backend",
        "importer",
        39,
        [
            E(
                "click cli",
                [
                    T(
                        "Give the CSV importer a real command line with click",
                        "importer/cli.py: import, validate and dry-run commands, --delimiter and --encoding options.",
                        reads="importer/main.py",
                        writes="importer/cli.py setup.cfg",
                    ),
                ],
                [
                    "the importer's command line needs a --skip-header flag and a progress bar",
                ],
            ),
            E(
                "validation report",
                [
                    T(
                        "The validate command should write a report of bad rows",
                        "Writes bad_rows.csv with row number and the reason per failed rule.",
                        writes="importer/validate.py importer/cli.py",
                    ),
                ],
                [
                    "the bad rows report of the CSV importer should also be available as JSON",
                    "continue with the importer's validation report: group errors by rule and count them",
                ],
            ),
        ],
    ),
    Sess(
        "email-i18n",
        "backend",
        "shop-web",
        8,
        [
            E(
                "translate emails",
                [
                    T(
                        "Translate the order confirmation emails to German and French",
                        "Extracted strings to gettext catalogs (locale/de, locale/fr), the mailer picks the customer's locale.",
                        writes="templates/email/order_confirmation.html locale/de/LC_MESSAGES/emails.po locale/fr/LC_MESSAGES/emails.po",
                    ),
                ],
                [
                    "order confirmation mails should also go out in Spanish; continue with the email translations",
                    "dates in the translated emails still use the english format, fix the localization",
                ],
            ),
        ],
    ),
    Sess(
        "tz-bug",
        "backend",
        "shop-api",
        1,
        [
            E(
                "timezone bug",
                [
                    T(
                        "Orders placed just before midnight show up on the wrong day in reports",
                        "utils/dates.py used naive datetimes in server time; now everything is UTC-aware and converted to the "
                        "store's timezone at the edges.",
                        reads="utils/dates.py",
                        writes="utils/dates.py",
                    ),
                    T(
                        "Add unit tests for the date helpers around DST changes",
                        "Added tests for the spring-forward and fall-back days in Europe/Berlin and America/New_York.",
                        writes="tests/test_dates.py",
                    ),
                ],
                [
                    "the daylight saving tests of the date utils fail on the CI machine in UTC; continue on that",
                    "orders near midnight on the DST switch day still land on the wrong report day",
                ],
            ),
        ],
    ),
    Sess(
        "broken-deploy",
        "devops",
        "shop-api",
        5,
        [
            E(
                "deploy attempt",
                [
                    T(
                        "Deploy the API to staging with the new helm chart",
                        "helm upgrade failed: the chart references a secret that does not exist in staging.",
                        reads="helm/api/values-staging.yaml",
                        status="failed",
                    ),
                    T(
                        "Create the missing secret and retry the staging deploy",
                        "Created api-db-credentials from the vault path and re-ran helm upgrade; staging is up on revision 14.",
                        writes="helm/api/values-staging.yaml ops/secrets.md",
                    ),
                ],
                [
                    "the staging helm release: add a readiness probe before we promote to production",
                    "continue the staging deploy of the api chart, the vault secret rotation must not break it",
                ],
            ),
        ],
    ),
    Sess(
        "aborted-refactor",
        "backend",
        "shop-api",
        2,
        [
            E(
                "service split",
                [
                    T(
                        "Split the orders module into a service layer and a repository",
                        "Moved queries into orders/repo.py and started orders/service.py.",
                        reads="orders/views.py",
                        writes="orders/repo.py orders/service.py",
                    ),
                    T(
                        "Move the discount logic into the service too",
                        "Started moving apply_discounts() but the run was stopped halfway.",
                        writes="orders/service.py",
                        status="aborted",
                    ),
                ],
                [
                    "continue separating the orders code into repository and service layers",
                ],
            ),
        ],
    ),
]
