"""Training backends: ``tiny`` (a small CPU policy trained with GRPO or PPO on toolworld)."""
