"""The rule that chooses the base among the behaviour-cloning checkpoints (config/README.md, pretrain)."""

import polars as pl

from axisrl.stages.pretrain import choose_base


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
