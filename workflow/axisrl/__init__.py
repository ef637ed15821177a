"""axisrl: measure how agentic-RL training data scales along environments, tasks and trajectories."""

__version__ = "0.1.0"
