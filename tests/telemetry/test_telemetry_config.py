"""``[telemetry]`` refuses what it cannot honour, at load or at start, naming the key and the fix."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from serve_helpers import nexus_env

from nexus.config import parse_config
from nexus.errors import ConfigError


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("sample_ratio = 2", "telemetry.sample_ratio: Input should be less than or equal to 1"),
        ('exporter = "zipkin"', "telemetry.exporter: Input should be 'otlp' or 'console'"),
        ('otlp_endpoint = "localhost:4318"', "telemetry.otlp_endpoint: 'localhost:4318' is not an http:// or https://"),
        ("tracng = true", "telemetry.tracng: unknown key 'tracng'"),
        ('log_format = "yaml"', "telemetry.log_format: Input should be 'text' or 'json'"),
        ('metrics = "yes"', "telemetry.metrics: Input should be a valid boolean"),
    ],
)
def test_bad_values_are_refused_at_load_with_the_line(line: str, said: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(f"[telemetry]\n{line}\n", "nexus.toml")
    assert f"nexus.toml:2: {said}" in str(info.value)


def test_the_defaults_cost_nothing_and_serve_metrics() -> None:
    settings = parse_config("").telemetry
    assert (settings.tracing, settings.capture_content, settings.metrics) == (False, False, True)
    assert (settings.exporter, settings.sample_ratio, settings.log_format) == ("otlp", 1.0, "text")


def _nexus(home: Path, config: str, *args: str, block_sdk: bool = False) -> subprocess.CompletedProcess[str]:
    home.mkdir(parents=True, exist_ok=True)
    (home / "nexus.toml").write_text(config, encoding="utf-8")
    # the SDK made unimportable, as on an install without the otel extra
    prelude = "import sys; sys.modules['opentelemetry.sdk'] = None; " if block_sdk else ""
    code = f"{prelude}from nexus.cli import main; raise SystemExit(main())"
    return subprocess.run(
        [sys.executable, "-c", code, *args], env=nexus_env(home), capture_output=True, text=True, timeout=60
    )


def test_tracing_without_the_sdk_says_which_extra_to_install(isolated_env: Path) -> None:
    done = _nexus(isolated_env, "[telemetry]\ntracing = true\n", "queue", "drain", block_sdk=True)
    assert done.returncode == 2, done.stderr
    assert "[telemetry] tracing = true needs the OpenTelemetry SDK: pip install 'nexus-broker[otel]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_unset_variable_in_the_metrics_token_stops_serve_before_it_starts(isolated_env: Path) -> None:
    done = _nexus(isolated_env, '[telemetry]\nmetrics_token = "${NO_SUCH_SCRAPE_TOKEN}"\n', "serve", "--port", "0")
    assert done.returncode == 2 and "[telemetry] metrics_token uses ${NO_SUCH_SCRAPE_TOKEN}" in done.stderr
    assert not (isolated_env / "server.json").exists() and not (isolated_env / "agents.db").exists()


def test_an_unset_variable_in_an_exporter_header_is_named(isolated_env: Path) -> None:
    config = '[telemetry]\ntracing = true\notlp_headers = { "x-api-key" = "${NO_SUCH_COLLECTOR_KEY}" }\n'
    done = _nexus(isolated_env, config, "queue", "drain")
    assert done.returncode == 2
    assert "[telemetry] otlp_headers.x-api-key uses ${NO_SUCH_COLLECTOR_KEY} but NO_SUCH_COLLECTOR_KEY is not set" in (
        done.stderr
    )
