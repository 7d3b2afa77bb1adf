"""docker/: the compose file is valid Compose, its services are what the README
promises (Redis with AOF and a password, workers that scale, Flower behind basic
auth, the sim server), and their commands are real covey commands. No Docker
engine runs here, so the file is checked against the Compose specification's
JSON schema, as shipped by check-jsonschema (a test extra)."""

from __future__ import annotations

import json
import re
from importlib.resources import files
from pathlib import Path

import jsonschema
import pytest
import yaml

from covey.cli import cli, exposure
from covey.config.settings import Settings
from covey.models.catalog import Catalog

DOCKER = Path(__file__).resolve().parents[1] / "docker"
COVEY_SERVICES = ("worker", "flower", "sim")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((DOCKER / "compose.yml").read_text())


def _defaults(value: str) -> str:
    """Compose's interpolation with every variable at its default (``${X:-d}``)."""
    return re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", value)


def test_compose_file_matches_the_compose_specification(compose):
    schema = json.loads((files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json").read_text())
    jsonschema.validate(compose, schema)


def test_redis_keeps_an_append_only_file_behind_a_password(compose):
    redis = compose["services"]["redis"]
    command = " ".join(redis["command"])
    assert "--appendonly yes" in command and "--requirepass" in command
    assert any(v.endswith(":/data") for v in redis["volumes"])
    for name in ("worker", "flower"):
        url = compose["services"][name]["environment"]["COVEY_REDIS_URL"]
        assert re.fullmatch(r"redis://:\$\{REDIS_PASSWORD:\?[^}]+\}@redis:6379/0", url)


def test_workers_scale(compose):
    worker = compose["services"]["worker"]
    assert "container_name" not in worker and "ports" not in worker  # both clash at --scale worker=N


def test_flower_is_behind_basic_auth_on_its_network_address(compose):
    service = compose["services"]["flower"]
    command = service["command"]
    address = command[command.index("--address") + 1]
    assert not exposure.is_loopback(address)
    assert service["environment"]["COVEY_FLOWER_BASIC_AUTH"].startswith("${FLOWER_BASIC_AUTH:?")


@pytest.mark.parametrize("service", COVEY_SERVICES)
def test_service_commands_are_covey_commands(compose, service):
    program, verb, *args = [_defaults(part) for part in compose["services"][service]["command"]]
    assert program == "covey"
    cli.commands[verb].make_context(verb, args)  # raises on an unknown option or a bad value


def test_workers_reach_the_sim_server_through_their_models_file(compose, tmp_path):
    path = tmp_path / "models.toml"
    path.write_text(compose["configs"]["models"]["content"])
    worker = compose["services"]["worker"]
    assert worker["environment"]["COVEY_MODELS"] == worker["configs"][0]["target"]
    served = {m.name: m for m in Catalog.from_settings(Settings(models=path), worker["environment"]).served()}
    sim = compose["services"]["sim"]["command"]
    assert served["simhttp"].endpoint == f"http://sim:{sim[sim.index('--port') + 1]}/v1"
    assert served["simhttp"].key_set


def test_image_copies_what_exists_and_runs_as_a_user():
    lines = [line.split() for line in (DOCKER / "Dockerfile").read_text().splitlines() if line and line[0] != "#"]
    root = DOCKER.parent
    for line in lines:
        if line[0] == "COPY":
            assert all((root / src).exists() for src in line[1:-1]), line
    assert next(line for line in lines if line[0] == "FROM")[1].endswith("-slim")
    assert [line for line in lines if line[0] == "USER"][-1][1] not in ("root", "0")


def test_prometheus_scrapes_every_worker_on_its_metrics_port(compose):
    command = compose["services"]["worker"]["command"]
    port = int(command[command.index("--metrics-port") + 1])
    [job] = yaml.safe_load(compose["configs"]["prometheus"]["content"])["scrape_configs"]
    [found] = job["dns_sd_configs"]
    assert found == {"names": ["worker"], "type": "A", "port": port}
    assert str(port) in compose["services"]["worker"]["expose"]


def test_the_dashboard_reads_only_metrics_the_worker_exports(compose):
    from prometheus_client.metrics import MetricWrapperBase

    from covey.worker import metrics

    suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_count", "_sum"], "gauge": [""]}
    families = [f for m in vars(metrics).values() if isinstance(m, MetricWrapperBase) for f in m.describe()]
    exported = {f.name + suffix for f in families for suffix in suffixes[f.type]}
    dashboard = json.loads((DOCKER / "grafana-dashboard.json").read_text())
    read = {name for p in dashboard["panels"] for t in p["targets"] for name in re.findall(r"covey_\w+", t["expr"])}
    assert read and read <= exported, read - exported
    shown = compose["services"]["grafana"]["configs"]
    assert {"source": "grafana-dashboard", "target": "/var/lib/grafana/dashboards/covey.json"} in shown
    assert compose["configs"]["grafana-dashboard"]["file"] == "./grafana-dashboard.json"
