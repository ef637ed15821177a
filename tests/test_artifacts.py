import json

import polars as pl
import pytest

from axisrl import artifacts
from axisrl.artifacts import ArtifactError, catalog, machine, read_artifact, read_meta, write_artifact
from axisrl.cli import main
from axisrl.config import StageSpec

SPEC = StageSpec("synthesize", {"synthesize": {"seed": 3, "thetas": [0.1]}}, {"upstream": "abcdef012345"})
FRAME = pl.DataFrame({"task_id": ["a", "b", "c"], "n_steps": [1, 2, 3], "edits": [["x"], [], ["y", "z"]]})


@pytest.fixture()
def artifact(tmp_path):
    path = tmp_path / "results" / "synthesize" / SPEC.key / "tasks.parquet"
    write_artifact(FRAME, path, SPEC)
    return path


def test_roundtrip_keeps_data_and_the_config_that_was_hashed(artifact):
    assert read_artifact(artifact, "synthesize").equals(FRAME)
    assert pl.read_parquet(artifact).equals(FRAME)
    meta = read_meta(artifact)
    assert (meta.stage, meta.key, meta.inputs) == ("synthesize", SPEC.key, SPEC.inputs)
    assert StageSpec(meta.stage, meta.config, meta.inputs).key == meta.key
    assert set(meta.libraries) == set(artifacts.LIBRARIES)


def test_a_finished_studys_columns_are_read_under_their_names_of_today(tmp_path):
    """A runs table written before issue 60 holds ``max_rollout_steps`` and ``max_flops``; read back, they
    are ``token_cap`` and ``flop_cap``, as the config keys say, and a column of today is never overwritten."""
    old = pl.DataFrame({"run_key": ["a"], "max_rollout_steps": [None], "max_flops": [2.5e7], "d_traj": [8]})
    path = tmp_path / "results" / "synthesize" / SPEC.key / "runs.parquet"
    write_artifact(old, path, SPEC)
    read = read_artifact(path, "synthesize")
    assert read.columns == ["run_key", "token_cap", "flop_cap", "d_traj"] and read["flop_cap"][0] == 2.5e7
    both = pl.DataFrame({"d_traj": [8], "group_size": [4]})
    assert artifacts.with_current_names(both).columns == ["d_traj", "group_size"]


def test_wrong_stage_is_refused(artifact):
    with pytest.raises(ArtifactError, match="written by stage 'synthesize', expected 'dedup'"):
        read_artifact(artifact, "dedup")


def test_failed_write_leaves_nothing_behind(tmp_path, monkeypatch):
    def write_half_then_die(frame, where, **kwargs):
        with open(where, "wb") as handle:
            handle.write(b"PAR1 half a file")
        raise KeyboardInterrupt  # as a kill would interrupt it

    monkeypatch.setattr(pl.DataFrame, "write_parquet", write_half_then_die)
    target = tmp_path / "out" / "envs.parquet"
    with pytest.raises(KeyboardInterrupt):
        write_artifact(FRAME, target, SPEC)
    assert list(target.parent.iterdir()) == []


def test_truncated_file_gives_one_clear_error_naming_it(artifact):
    data = artifact.read_bytes()
    artifact.write_bytes(data[: len(data) // 2])
    with pytest.raises(ArtifactError) as caught:
        read_artifact(artifact)
    message = str(caught.value)
    assert str(artifact) in message and "truncated or corrupt" in message and "\n" not in message


def test_missing_file_is_named(tmp_path):
    with pytest.raises(ArtifactError, match="missing artifact"):
        read_artifact(tmp_path / "nope.parquet")


def test_other_schema_version_is_refused_with_the_version_named(artifact, monkeypatch):
    monkeypatch.setattr(artifacts, "SCHEMA_VERSION", 99)
    with pytest.raises(ArtifactError, match="schema version 1, this axisrl reads version 99"):
        read_artifact(artifact)


def test_foreign_parquet_is_refused(tmp_path):
    path = tmp_path / "foreign.parquet"
    FRAME.write_parquet(path)
    with pytest.raises(ArtifactError, match="not an axisrl artifact"):
        read_meta(path)


def test_catalog_lists_artifacts_and_flags_broken_ones(artifact):
    results = artifact.parents[2]
    broken = results / "dedup" / "000000000000" / "x.parquet"
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"not parquet")
    listed = catalog(results)
    assert listed.height == 2
    good = listed.filter(pl.col("error").is_null()).row(0, named=True)
    assert (good["stage"], good["key"], good["rows"]) == ("synthesize", SPEC.key, 3)
    assert json.loads(good["config"]) == SPEC.config
    assert listed.filter(pl.col("error").is_not_null())["path"].to_list() == [str(broken)]


def test_cli_show_and_catalog(artifact, capsys):
    assert main(["show", str(artifact)]) == 0
    shown = capsys.readouterr().out
    for expected in ("stage synthesize", SPEC.key, "3 rows x 3 columns", "n_steps: Int64", '"seed": 3'):
        assert expected in shown
    assert f"machine {json.dumps(machine())}" in shown  # the CPU it was written on (docs/guarantees.md)
    assert main(["catalog", str(artifact.parents[2])]) == 0
    assert SPEC.key in capsys.readouterr().out


def test_cli_error_is_one_line_and_exit_code_2(tmp_path, capsys):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"garbage")
    assert main(["show", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(bad) in err


def test_a_heldout_pool_that_overlaps_training_is_refused():
    from axisrl.dedup import check_heldout_disjoint

    train = pl.DataFrame({"env_s1": ["a", "b"], "skin": ["x", "y"]})
    check_heldout_disjoint(train, pl.DataFrame({"tier": ["T2", "T1"], "env_s1": ["c", "a"], "skin": ["z", "x"]}))
    with pytest.raises(ValueError, match="held-out T2/V pool overlaps training: 1 shared env_s1 value"):
        check_heldout_disjoint(train, pl.DataFrame({"tier": ["T2"], "env_s1": ["b"], "skin": ["z"]}))


def test_every_artifact_records_the_library_versions(artifact):
    from importlib.metadata import version

    libraries = read_meta(artifact).libraries
    assert libraries["torch"] == version("torch") and libraries["polars"] == pl.__version__


def test_every_artifact_records_the_cpu_it_was_written_on(artifact):
    """Training is bit-identical on one kind of CPU only, so an artifact says which kind wrote it."""
    import platform

    machine = read_meta(artifact).machine
    assert set(machine) == {"architecture", "cpu", "vector"} and machine["architecture"] == platform.machine()
    assert machine["cpu"] and machine["vector"] in {isa for isa, _ in artifacts.VECTOR_FLAGS} | {"other", "unknown"}
