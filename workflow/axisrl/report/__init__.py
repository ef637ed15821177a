"""The paper's tables and figures, built from the workflow's Parquet outputs (polars in, files out)."""
