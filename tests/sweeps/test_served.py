"""A grid's models are checked against what the workers on the sweep's queue serve,
and against this machine's settings only when no worker publishes."""

from __future__ import annotations

import pytest

from covey.config.settings import Settings
from covey.store.catalog import WorkerEntry
from covey.sweeps.errors import SweepInputError
from covey.sweeps.grid import load_grid
from covey.sweeps.served import check_models


def row(name: str) -> dict:
    return {"name": name, "endpoint": "http://127.0.0.1:9/v1", "model": name, "key_env": "K", "key_set": True}


WORKERS = [WorkerEntry(worker="w@h", queues=["covey-sweeps"], tools=[], models=[row("sim"), row("fast")])]


def grid(tmp_path, *models: str):
    path = tmp_path / "g.toml"
    path.write_text(f"models = {list(models)!r}\n".replace("'", '"') + 'strategies = ["single"]\n')
    return load_grid(path)


def test_a_model_only_the_workers_serve_passes_and_a_typo_of_it_is_refused(tmp_path):
    check_models(grid(tmp_path, "sim", "fast"), Settings(), "g.toml", "covey-sweeps", WORKERS)
    with pytest.raises(SweepInputError) as e:
        check_models(grid(tmp_path, "sim", "fats"), Settings(), "g.toml", "covey-sweeps", WORKERS)
    assert str(e.value) == (
        "g.toml: configuration fats/single: model 'fats' is served by no worker on queue 'covey-sweeps'; "
        "served: fast, sim; did you mean 'fast'?"
    )


def test_a_workers_default_endpoint_serves_any_name(tmp_path):
    workers = [WORKERS[0].model_copy(update={"models": [row("sim"), row("*")]})]
    check_models(grid(tmp_path, "gpt-9"), Settings(), "g.toml", "covey-sweeps", workers)


def test_with_no_worker_publishing_this_machines_settings_stand_in(tmp_path):
    with pytest.raises(SweepInputError, match="model 'fast': no endpoint on this worker serves it"):
        check_models(grid(tmp_path, "fast"), Settings(), "g.toml", "covey-sweeps", [])
    check_models(grid(tmp_path, "fast"), Settings(openai_base_url="http://127.0.0.1:9/v1"), "g.toml", "q", [])


def test_a_configuration_without_a_model_is_said_to_take_covey_model(tmp_path):
    path = tmp_path / "g.toml"
    path.write_text('strategies = ["single"]\n')
    with pytest.raises(SweepInputError) as e:
        check_models(load_grid(path), Settings(model="simm"), "g.toml", "covey-sweeps", WORKERS)
    assert str(e.value) == (
        "g.toml: configuration default/single: model 'simm' (COVEY_MODEL: the grid names no model) is served by "
        "no worker on queue 'covey-sweeps'; served: fast, sim; did you mean 'sim'?"
    )
