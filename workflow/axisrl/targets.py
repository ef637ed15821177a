"""Names of the analysis outputs and the paper's tables and figures: plain constants, so the
Snakefile can declare every target at parse time without importing the analysis libraries."""

LAW_FRAMES = ("axis_fits", "points", "local_slopes", "trends", "loo", "bootstrap", "ordering", "joint",
              "interaction", "table2", "table4", "table5", "table7", "table8", "table10", "table11", "table12",
              "table13", "table14", "table15", "warnings")
"""Every frame the ``laws`` stage writes (one Parquet file each)."""

LAW_TABLES = {
    "table2": "Table 2: per-axis exponents by model size, algorithm and reward density",
    "table4": "Table 4: calibration of the held values (smallest value within tolerance of the sweep's best)",
    "table5": "Table 5: exponents at other held values of the other axes",
    "table7": "Table 7: environment exponent by pool construction (signature level; placebo)",
    "table8": "Table 8: worlds vs variants at fixed D_E = W x V",
    "table10": "Table 10: exponents under three training-budget conventions",
    "table11": "Table 11: fits on the narrower grid vs on all grid points",
    "table12": "Table 12: fit-free local log-log slopes",
    "table13": "Table 13: exponents per domain (further domains and model families)",
    "table14": "Table 14: task exponent with D_T counted under embedding-dedup thresholds",
    "table15": "Table 15: task exponent with D_T counted under signature dedup rules",
}
"""The tables computed by the ``laws`` stage: target name -> title."""

TABLE9_TITLE = ("Table 9: training-signal accounting along every sweep and for the strategy runs (compute: "
                "FLOPs the runs executed, against what their budgets are charged, declared prices excluded)")

PRICING_FRAMES = ("pricing", "collapse", "curves", "table3", "table16", "table17")
"""Every frame the ``pricing`` stage writes."""

PRICING_TABLES = {
    "table3": "Table 3: synthesis methods priced on one ruler: discount kappa at r = 1, collapse ratio r*, cost",
    "table16": "Table 16: kappa and r* per method as run and reduced to the common generate-filter-train core",
    "table17": "Table 17: collapse ratio of the representative methods under alternative definitions of collapse",
}
"""The tables computed by the ``pricing`` stage: target name -> title."""

RECIPE_FRAMES = ("law", "cost", "path", "exponents", "curves", "table18", "table19", "table20", "table21",
                 "strategies")
"""Every frame the ``recipe`` stage writes; ``strategies`` holds the pre-registered runs it plans."""

RECIPE_TABLES = {
    "table18": "Table 18: measured cost drivers per domain (means over the runs the recipe law is fitted to)",
    "table19": "Table 19: recipe exponents under progressively richer cost models (an identified_ column is false where the fitted law gives that axis no effect, so its slope only shows where the budget constraint put spare compute)",
    "table20": "Table 20: recipe exponents per domain (OLS slope of ln x* on ln C, bootstrap interval; identified is false where the fitted law gives the axis no effect, so its slope only shows where the budget constraint put spare compute)",
    "table21": "Table 21: recipe-exponent sensitivity to +-50% perturbations of cost coefficients (an identified_ column is false where the fitted law gives that axis no effect, so its slope only shows where the budget constraint put spare compute)",
}
"""The tables computed by the ``recipe`` stage: target name -> title."""

VALIDATE_FRAMES = ("measured", "efficiency")
"""Every frame the ``validate`` stage writes: the strategy runs' measured success against their
pre-registered predictions, and the recipe's compute efficiency over each baseline."""
