"""Training backends: ``tiny`` (a small CPU policy trained with GRPO, PPO or behaviour cloning on the
procedural domains that have a tiny base: toolworld, webworld and repoworld), ``verl`` (LLM training on a
GPU cluster) and the LLM evaluators (``llm_eval`` with ``vllm_eval`` and ``hf_eval``). Backends know nothing
of Snakemake: the stages call them."""
