"""``GET /metrics`` of a real ``nexus serve``, over real HTTP, read by the Prometheus client's own parser.

One agent's message: the provider answers 529 to the first call (failover retries), then a
``read`` tool call, then the reply, which goes to a ``jsonl`` adapter. Every metric of
docs/observability.md is checked against what happened, and the endpoint's guards: the API
token or the scraper's own token, never none, and the Host check.
"""

from __future__ import annotations

import httpx
import pytest
from serve_helpers import get, nexus_env, samples, serving, stop, total, value, wait_for

from nexus.testing import FakeProviderServer
from nexus.testing.steps import http_error, text, tool_call

pytestmark = pytest.mark.slow  # a real server process

API_TOKEN = "api-token-0123456789"
SCRAPE_TOKEN = "scrape-token-0123456789"


def write_home(home, provider: FakeProviderServer, out) -> None:  # type: ignore[no-untyped-def]
    home.mkdir(parents=True, exist_ok=True)
    (home / "workspace").mkdir(exist_ok=True)
    (home / "workspace" / "notes.txt").write_text("the notes\n", encoding="utf-8")
    (home / "nexus.toml").write_text(
        f"""default_model = "fake/fake-model"

[server]
tokens = ["${{NEXUS_TOKEN}}"]

[telemetry]
metrics_token = "${{SCRAPE_TOKEN}}"

[providers.fake]
api = "openai-completions"
base_url = "{provider.openai_base_url}"
api_key = "test"

[agents.coder]
tools = ["read"]

[adapters.files]
builtin = "jsonl"
[adapters.files.accounts.a]
config = {{ path = "{out}" }}
""",
        encoding="utf-8",
    )


def test_metrics_count_what_a_run_did_and_only_tokens_may_read_them(isolated_env) -> None:  # type: ignore[no-untyped-def]
    out = isolated_env / "out.jsonl"
    script = (http_error(529, "Overloaded"), tool_call("read", {"path": "notes.txt"}), text("the answer"))
    with FakeProviderServer(*script) as provider:
        write_home(isolated_env, provider, out)
        env = nexus_env(isolated_env, NEXUS_TOKEN=API_TOKEN, SCRAPE_TOKEN=SCRAPE_TOKEN)
        with serving(isolated_env, env=env) as (process, url):
            sent = httpx.post(
                f"{url}/v1/agents/coder/messages",
                json={"content": "read the notes", "id": "m-1", "mode": "followup", "deliver": "files/a:chat:5"},
                headers={"authorization": f"Bearer {API_TOKEN}"},
                timeout=10,
            )
            assert sent.status_code == 202, sent.text
            wait_for(lambda: out.exists() and out.read_text().strip(), "the delivery")
            with httpx.stream("GET", f"{url}/v1/sessions/agent:coder/events",
                              headers={"authorization": f"Bearer {API_TOKEN}"}, timeout=10):  # fmt: skip
                scraped = get(f"{url}/metrics", SCRAPE_TOKEN)  # one event stream open while scraped
            assert scraped.status_code == 200, scraped.text
            assert scraped.headers["content-type"].startswith("text/plain; version=0.0.4")
            refusals = {
                "no token": get(f"{url}/metrics").status_code,
                "wrong token": get(f"{url}/metrics", "nope-0123456789").status_code,
                "the scrape token on the API": get(f"{url}/v1/agents", SCRAPE_TOKEN).status_code,
                "a rebound Host": get(f"{url}/metrics", API_TOKEN, host="evil.example").status_code,
            }
            with_api_token = get(f"{url}/metrics", API_TOKEN)
            stderr = stop(process)
    assert refusals == {"no token": 401, "wrong token": 401, "the scrape token on the API": 401, "a rebound Host": 403}
    assert with_api_token.status_code == 200
    assert "Traceback" not in stderr and SCRAPE_TOKEN not in stderr

    found = samples(scraped.text)
    assert value(found, "nexus_queue_accepted_total", agent="coder", mode="followup") == 1
    assert value(found, "nexus_queue_claim_latency_seconds_count", agent="coder") == 1
    assert value(found, "nexus_queue_depth", agent="coder") == 0
    assert value(found, "nexus_runs_in_flight", agent="coder") == 0
    assert value(found, "nexus_run_duration_seconds_count", agent="coder", status="end_turn") == 1
    assert value(found, "nexus_model_calls_total", provider="fake", model="fake-model") == 3  # 529, tool call, reply
    assert value(found, "nexus_provider_errors_total", provider="fake", kind="overloaded") == 1
    assert value(found, "nexus_failovers_total", kind="retry", reason="overloaded") == 1
    assert value(found, "nexus_first_token_latency_seconds_count", provider="fake", model="fake-model") == 2
    assert value(found, "nexus_model_tokens_total", provider="fake", model="fake-model", type="input") > 0
    assert value(found, "nexus_model_tokens_total", provider="fake", model="fake-model", type="output") > 0
    assert total(found, "nexus_model_cost_usd_total") == 0  # the fake model has no prices
    assert value(found, "nexus_tool_call_duration_seconds_count", tool="read") == 1
    assert total(found, "nexus_tool_call_errors_total") == 0
    assert value(found, "nexus_adapter_deliveries_total", adapter="files", status="delivered") == 1
    assert value(found, "nexus_sse_subscribers") == 1
    assert value(found, "nexus_event_loop_lag_seconds_count") >= 1
