"""Telemetry off is nothing loaded: a worker without OTEL_* or PROMETHEUS_MULTIPROC_DIR
imports neither the trace SDK nor prometheus_client, and each hook hands back the same no-op."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.integration.conftest import ROOT

# redis-py imports OpenTelemetry's metrics API where it is installed; covey's traces are its trace SDK and exporter.
PROBE = (
    "TRACE_SDK = ('opentelemetry.sdk.trace', 'opentelemetry.exporter', 'covey.worker.tracing');"
    "import sys, json; import covey.worker.tasks; from covey.worker import telemetry;"
    "print(json.dumps({'otel': any(m.startswith(TRACE_SDK) for m in sys.modules),"
    " 'prometheus': 'prometheus_client' in sys.modules,"
    " 'same': telemetry.step(None, 'j', 'a') is telemetry.tool_call(None, None)}))"
)


def probe(**env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PROMETHEUS_", "COVEY_"))}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env={**clean, **env}, cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_worker_without_telemetry_imports_no_sdk():
    assert probe() == {"otel": False, "prometheus": False, "same": True}


def test_an_endpoint_turns_tracing_on_and_otel_sdk_disabled_keeps_it_off():
    assert probe(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9")["otel"] is True
    assert probe(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9", OTEL_SDK_DISABLED="true")["otel"] is False


def test_a_metrics_folder_turns_metrics_on(tmp_path):
    assert probe(PROMETHEUS_MULTIPROC_DIR=str(tmp_path)) == {"otel": False, "prometheus": True, "same": False}
