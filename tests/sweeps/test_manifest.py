import pytest

from covey.sweeps.manifest import Manifest, SweepMismatch


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
