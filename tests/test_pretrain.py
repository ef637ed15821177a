"""The rule that chooses the base among the behaviour-cloning checkpoints (config/README.md, pretrain)."""

import polars as pl
import pytest
import yaml

from axisrl.config import load_config, load_yaml
from axisrl.stages import study
from axisrl.stages.pretrain import SELECTED_ON, choose_base
from conftest import DEFAULT_CONFIG, SCHEMA_PATH, SMOKE, SMOKE_CONFIG, copy_study, snakemake


def pretrain_keys(overlay) -> set[str]:
    """The keys of the bases the smoke study's runs start from, under ``overlay``."""
    config = load_config(DEFAULT_CONFIG, SMOKE_CONFIG, overlay, schema_path=SCHEMA_PATH)
    points = study(config, load_yaml(SCHEMA_PATH)).points.values()
    return {point.train.inputs["pretrain"] for point in points if "pretrain" in point.train.inputs}


def test_the_base_is_the_earliest_checkpoint_that_reaches_the_target_else_the_best():
    checkpoints = pl.DataFrame({"bc_steps": [0, 1, 2, 3, 4], "p_V": [0.01, 0.10, 0.16, 0.12, 0.30]})
    assert choose_base(checkpoints, 0.15) == 2  # earliest at or above, not the best
    assert choose_base(checkpoints, 0.10) == 1  # at the target counts
    assert choose_base(checkpoints, 0.50) == 4  # none reaches it: the best
    tied = pl.DataFrame({"bc_steps": [0, 1, 2], "p_V": [0.0, 0.2, 0.2]})
    assert choose_base(tied, 0.9) == 1  # the earliest of the best
    unevaluated = pl.DataFrame({"bc_steps": [0, 1, 2, 3], "p_V": [0.01, 0.2, None, None]})
    assert choose_base(unevaluated, 0.15) == 1
    assert choose_base(unevaluated.with_columns(p_V=pl.Series([0.01, 0.1, None, None])), 0.15) == 1


def test_a_base_chosen_on_sampled_play_is_chosen_by_the_same_rule_on_its_own_column():
    checkpoints = pl.DataFrame({"bc_steps": [0, 5, 10], "p_V": [0.01, 0.20, 0.25], "p_V_sampled": [0.0, 0.05, 0.12]})
    assert choose_base(checkpoints, 0.15) == 1  # greedy reaches it at 5 steps
    assert choose_base(checkpoints, 0.10, SELECTED_ON["sampled"]) == 2  # sampled only at 10
    assert choose_base(checkpoints, 0.50, SELECTED_ON["sampled"]) == 2  # none: the best sampled


@pytest.mark.slow
def test_the_smoke_base_chosen_on_sampled_play_records_both_and_keeps_the_greedy_key(smoke_upstream, tmp_path):
    """``pretrain.select: sampled`` plays every checkpoint it evaluates both ways and chooses on
    sampled play; at its default (greedy) the base's key is the one from before the option."""
    workdir = copy_study(smoke_upstream, tmp_path)
    overlays = {
        "sampled": {"select": "sampled", "base_success": 0.05},
        "greedy": {"select": "greedy", "base_success": 0.05},
        "before": {"base_success": 0.05},
    }
    for name, pretrain in overlays.items():
        (workdir / f"{name}.yaml").write_text(yaml.safe_dump({"pretrain": pretrain}))
    snakemake(workdir, "base", "--cores", "2", *SMOKE, "sampled.yaml")
    keys = pretrain_keys(workdir / "sampled.yaml")
    greedy = pretrain_keys(workdir / "greedy.yaml")
    assert greedy == pretrain_keys(workdir / "before.yaml") and not keys & greedy
    for key in keys:
        frame = pl.read_parquet(workdir / "results" / "pretrain" / key / "checkpoints.parquet")
        played = frame.filter(pl.col("p_V").is_not_null())
        assert played.height >= 1 and played["p_V_sampled"].null_count() == 0
        assert frame["chosen"].arg_true()[0] == choose_base(frame, 0.05, "p_V_sampled")
