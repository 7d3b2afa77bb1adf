import fcntl
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from covey.sweeps import manifest as manifest_module
from covey.sweeps.errors import SweepInputError
from covey.sweeps.manifest import LOCK_FILE, Manifest, SweepMismatch


def test_a_rerun_is_the_same_sweep_and_keeps_its_caps(tmp_path):
    first = Manifest.open(tmp_path, "d.jsonl", "g.toml", max_tokens_total=1000, max_cycles_total=None)
    again = Manifest.open(tmp_path, "d.jsonl", "g.toml", max_tokens_total=None, max_cycles_total=50)
    assert again.id == first.id and again.scope == f"sweep:{first.id}"
    assert (again.max_tokens_total, again.max_cycles_total) == (1000, 50)


def test_another_directory_is_another_sweep(tmp_path):
    a = Manifest.open(tmp_path / "a", "d", "g", None, None)
    b = Manifest.open(tmp_path / "b", "d", "g", None, None)
    assert a.id != b.id


def test_a_manifest_older_than_digests_takes_them_from_the_next_run(tmp_path):
    old = Manifest.open(tmp_path, "d", "g", None, None)
    again = Manifest.open(tmp_path, "d", "g", None, None, dataset_digest="a", grid_digest="b")
    assert again.id == old.id and (again.dataset_digest, again.grid_digest) == ("a", "b")
    with pytest.raises(SweepMismatch) as refused:
        Manifest.open(tmp_path, "d", "g", None, None, dataset_digest="a", grid_digest="other")
    assert refused.value.which == "grid"


def test_a_copy_of_a_directory_is_a_sweep_of_its_own_that_keeps_the_caps(tmp_path):
    first = Manifest.open(tmp_path / "a", "d", "g", max_tokens_total=1000, max_cycles_total=None)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    kept = Manifest.check(tmp_path / "b", None, None)
    assert kept is not None and kept.original(tmp_path / "b") == (tmp_path / "a").resolve()
    copy = Manifest.open(tmp_path / "b", "d", "g", None, None)
    assert copy.id != first.id and copy.copy_of == first.id and copy.max_tokens_total == 1000
    assert Manifest.open(tmp_path / "b", "d", "g", None, None).id == copy.id  # and stays that sweep
    assert Manifest.open(tmp_path / "a", "d", "g", None, None).id == first.id  # the original is untouched


def test_a_moved_directory_is_the_same_sweep(tmp_path):
    first = Manifest.open(tmp_path / "a", "d", "g", None, None)
    (tmp_path / "a").rename(tmp_path / "b")
    assert Manifest.check(tmp_path / "b", None, None).original(tmp_path / "b") is None
    moved = Manifest.open(tmp_path / "b", "d", "g", None, None)
    assert moved.id == first.id and moved.directory == str((tmp_path / "b").resolve())


def test_submitters_starting_a_directory_at_once_make_one_sweep(tmp_path):
    """Each of several submitters opening a new directory together gets the same id:
    one sweep under one cap, not one each with the last write winning the file. (The
    lock is on each opening of the lock file, so threads contend as processes do.)"""
    submitters = 6
    with ThreadPoolExecutor(submitters) as pool:
        for round_ in range(20):
            directory, start = tmp_path / f"d{round_}", threading.Barrier(submitters)

            def first_run(_: int, directory: Path = directory, start: threading.Barrier = start) -> str:
                start.wait(timeout=30)
                return Manifest.open(directory, "d", "g", None, None).id

            ids = list(pool.map(first_run, range(submitters)))
            assert len(set(ids)) == 1, ids
            assert Manifest.check(directory, None, None).id == ids[0]


def test_a_directory_whose_lock_another_submitter_keeps_is_refused_naming_it(tmp_path, monkeypatch):
    monkeypatch.setattr(manifest_module, "TURN_SECONDS", 0.2)
    with (tmp_path / LOCK_FILE).open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # a submitter stuck in its turn
        with pytest.raises(SweepInputError, match=r"\.sweep\.lock: another submitter held it for 0.2s; is one stuck\?"):
            Manifest.open(tmp_path, "d", "g", None, None)
    assert not (tmp_path / "sweep.json").exists()
    assert Manifest.open(tmp_path, "d", "g", None, None).id  # let go, the next run takes its turn
