"""verl backend, inputs: the exported Parquet (toolworld and mathcode rows) through verl's own dataset
class, and the override list through verl's own packaged config and validation (GRPO and PPO)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

# verl.trainer, not verl: with tests/ on sys.path this folder is itself importable as a namespace package "verl"
pytest.importorskip(
    "verl.trainer",
    reason="verl is not installed here; run bash tests/verl/setup_venv.sh and "
    "use .venv-verl/bin/python -m pytest tests/verl",
)

from verl.trainer.ppo.utils import need_critic, need_reference_policy  # noqa: E402
from verl.utils import hf_tokenizer  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset  # noqa: E402
from verl.utils.tracking import Tracking  # noqa: E402

from axisrl.backends.verl.config import compose, overrides, project_name, validate_overrides  # noqa: E402
from axisrl.backends.verl.episode import AGENT_NAME  # noqa: E402
from axisrl.backends.verl.export import write_verl_parquet  # noqa: E402
from axisrl.backends.verl.launch import longest_prompt, prepare  # noqa: E402
from axisrl.backends.verl.tiny_model import write_tiny_model  # noqa: E402
from axisrl.domains import mathcode  # noqa: E402
from axisrl.domains.toolworld import render_chat  # noqa: E402
from verl_support import small_mathcode_pool, small_pool, tiny_job, train_settings  # noqa: E402


@pytest.fixture(scope="module")
def pool(schema):
    return small_pool(schema)


@pytest.fixture(scope="module")
def frames(pool) -> dict[str, pl.DataFrame]:
    return {
        name: pl.DataFrame(getattr(pool, name), infer_schema_length=None)
        for name in ("envs", "tasks", "heldout_envs", "heldout_tasks")
    }


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return write_tiny_model(tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="module")
def tokenizer(model_dir):
    return hf_tokenizer(str(model_dir))


@pytest.fixture(autouse=True)
def datasets_cache(tmp_path, monkeypatch):
    """Keep the Arrow cache that ``datasets`` writes for every Parquet it loads out of ~/.cache."""
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf-datasets"))


def load(path: Path, tokenizer, data_config) -> list[dict]:
    dataset = RLHFDataset(str(path), tokenizer, data_config)
    return [dataset[i] for i in range(len(dataset))]


@pytest.mark.filterwarnings("ignore:Disabled critic")
@pytest.mark.parametrize("algo", ["grpo", "ppo"])
def test_prepared_run_passes_verl_config_validation_and_sets_the_pitfall_keys(
    schema, frames, model_dir, tmp_path, algo
):
    settings = train_settings(schema, algo, reward_density="dense")
    run = tiny_job(
        model_dir, tmp_path / "run dir, quoted", max_turns=5, max_tool_response_chars=300, enable_thinking=True
    )  # paths go through Hydra's override grammar
    override_list = prepare(
        settings, run, (frames["envs"], frames["tasks"]), (frames["heldout_envs"], frames["heldout_tasks"]), "toolworld"
    )
    cfg = validate_overrides(override_list)

    rollout = cfg.actor_rollout_ref.rollout
    assert rollout.n == settings["d_traj"]
    assert cfg.data.train_batch_size == settings["visits_per_update"]
    assert cfg.trainer.total_training_steps == settings["updates"]
    assert cfg.actor_rollout_ref.actor.optim.lr == settings["lr"]
    assert cfg.data.train_files == str(run.layout.train_file)
    assert cfg.algorithm.adv_estimator == ("grpo" if algo == "grpo" else "gae")
    assert need_critic(cfg) is (algo == "ppo") and not need_reference_policy(cfg)
    if algo == "ppo":
        assert cfg.critic.model.path == str(model_dir)
    assert rollout.name == "vllm" and rollout.agent.default_agent_loop == AGENT_NAME
    assert (
        rollout.multi_turn.max_assistant_turns,
        rollout.multi_turn.max_parallel_calls,
        rollout.multi_turn.max_tool_response_length,
    ) == (5, 1, 300)
    assert cfg.data.apply_chat_template_kwargs == {"enable_thinking": True}
    assert Path(rollout.agent.agent_loop_config_path).is_file()
    assert cfg.reward.custom_reward_function.path == "pkg://axisrl.backends.verl.reward"
    assert cfg.reward.custom_reward_function.reward_kwargs.reward_density == "dense"
    assert cfg.custom_reward_function.path is None  # the legacy key main_ppo ignores stays unset
    assert list(cfg.trainer.logger) == ["console", "file"]
    assert cfg.ray_kwargs.ray_init.num_cpus == 4 and cfg.ray_kwargs.ray_init._temp_dir == run.ray_dir
    assert len(run.ray_dir) < 48  # Ray's socket paths under it must stay within 107 bytes
    assert (cfg.trainer.n_gpus_per_node, cfg.trainer.nnodes) == (1, 1)
    assert cfg.trainer.default_local_dir == str(run.layout.checkpoints)
    assert (
        longest_prompt(run.layout.train_file, hf_tokenizer(str(model_dir)), run.chat_template_kwargs)
        <= cfg.data.max_prompt_length
    )


def test_experiment_loggers_join_the_file_logger_under_the_study_and_run_names(schema, frames, model_dir, tmp_path):
    """Every logger the schema accepts is one verl 0.9.1 accepts, and with all on the overrides still validate."""
    loggers = tuple(schema["properties"]["train"]["properties"]["llm"]["properties"]["loggers"]["items"]["enum"])
    assert set(loggers) <= set(Tracking.supported_backend)
    run = tiny_job(model_dir, tmp_path, loggers=loggers, project_name=project_name("mathcode", "/models/Qwen3-8B"))
    override_list = prepare(
        train_settings(schema, "grpo"),
        run,
        (frames["envs"], frames["tasks"]),
        (frames["heldout_envs"], frames["heldout_tasks"]),
        "toolworld",
    )
    cfg = validate_overrides(override_list)
    assert list(cfg.trainer.logger) == ["console", "file", "wandb", "mlflow", "tensorboard"]
    assert (cfg.trainer.project_name, cfg.trainer.experiment_name) == ("axisrl-mathcode-Qwen3-8B", "test-run")


def test_verl_validation_rejects_a_batch_the_gpus_cannot_split(schema, model_dir, tmp_path):
    settings = train_settings(schema, "grpo", d_traj=3) | {"visits_per_update": 7}  # 7 prompts x 3 = 21 samples
    with pytest.raises(AssertionError, match="divisible"):
        validate_overrides(overrides(settings, tiny_job(model_dir, tmp_path, n_gpus=2)))


def test_settings_verl_cannot_honour_are_refused(schema, model_dir, tmp_path):
    settings = train_settings(schema, "grpo")
    with pytest.raises(ValueError, match="token_cap"):
        overrides({**settings, "token_cap": 1000}, tiny_job(model_dir, tmp_path))
    sampling = {"dynamic_sampling": True, "max_draws": 3}  # the tiny learner's, as a design switched on carries them
    with pytest.raises(ValueError, match=r"cannot honour \['dynamic_sampling'\]"):
        overrides({**settings, **sampling}, tiny_job(model_dir, tmp_path))
    with pytest.raises(ValueError, match=r"cannot honour \['kl_bound'\]"):
        overrides({**settings, "kl_bound": "adaptive_lr", "target_kl": 0.01}, tiny_job(model_dir, tmp_path))
    with pytest.raises(ValueError, match="does not know"):
        overrides({**settings, "entropy_bonus": 0.1}, tiny_job(model_dir, tmp_path))


def test_exported_rows_load_with_verl_dataset_intact(pool, frames, tokenizer, schema, model_dir, tmp_path):
    data_config = compose(overrides(train_settings(schema, "grpo"), tiny_job(model_dir, tmp_path))).data
    specs = {env["env_id"]: env["spec"] for env in pool.envs + pool.heldout_envs}
    for split, envs, tasks in (("train", "envs", "tasks"), ("heldout", "heldout_envs", "heldout_tasks")):
        path = write_verl_parquet("toolworld", frames[envs], frames[tasks], tmp_path / f"{split}.parquet", split)
        rows = load(path, tokenizer, data_config)
        originals = getattr(pool, tasks)
        assert len(rows) == len(originals)
        assert len({tuple(sorted(row["extra_info"])) for row in rows}) == 1
        for row, task in zip(rows, originals):
            info = row["extra_info"]
            assert (row["data_source"], row["agent_name"]) == ("toolworld", AGENT_NAME)
            assert info["spec"] == specs[task["env_id"]]
            stored = json.loads(info["task"])
            assert json.loads(stored["reference"]) == json.loads(task["reference"])  # tool arguments intact
            assert (stored["goal"], stored["answer"]) == (task["goal"], task["answer"])
            assert json.loads(row["reward_model"]["ground_truth"]) == stored
            assert (info["split"], info["tier"], info["task_id"]) == (split, task["tier"], task["task_id"])
            assert row["raw_prompt"] == render_chat(json.loads(info["spec"]), task)["messages"]
            assert row["index"] == info["index"]
    assert {row["extra_info"]["tier"] for row in rows} == {"T0", "T1", "T2"}


def test_fewer_tasks_than_a_batch_are_repeated_whole(frames, tokenizer, schema, model_dir, tmp_path):
    data_config = compose(overrides(train_settings(schema, "grpo"), tiny_job(model_dir, tmp_path))).data
    path = write_verl_parquet(
        "toolworld", frames["envs"], frames["tasks"], tmp_path / "train.parquet", "train", min_rows=10
    )
    rows = load(path, tokenizer, data_config)
    assert len(rows) == 2 * frames["tasks"].height
    assert [row["extra_info"]["task_id"] for row in rows] == 2 * frames["tasks"]["task_id"].to_list()
    assert [row["index"] for row in rows] == list(range(len(rows)))


def test_exported_mathcode_rows_load_with_verl_dataset_intact(tokenizer, schema, model_dir, tmp_path):
    pool = small_mathcode_pool()
    data_config = compose(overrides(train_settings(schema, "grpo"), tiny_job(model_dir, tmp_path))).data
    specs = {env["env_id"]: env["spec"] for env in pool.envs + pool.heldout_envs}
    for split, envs, tasks in (("train", "envs", "tasks"), ("heldout", "heldout_envs", "heldout_tasks")):
        env_frame, task_frame = (pl.DataFrame(getattr(pool, name), infer_schema_length=None) for name in (envs, tasks))
        path = write_verl_parquet("mathcode", env_frame, task_frame, tmp_path / f"{split}.parquet", split)
        rows = load(path, tokenizer, data_config)
        originals = getattr(pool, tasks)
        assert len(rows) == len(originals)
        for row, task in zip(rows, originals):
            info = row["extra_info"]
            assert (row["data_source"], row["agent_name"]) == ("mathcode", AGENT_NAME)
            assert info["spec"] == specs[task["env_id"]]
            stored = json.loads(info["task"])
            assert (stored["goal"], stored["answer"], stored["instruction"]) == (
                task["goal"],
                task["answer"],
                task["instruction"],
            )
            assert json.loads(stored["reference"]) == json.loads(task["reference"])
            assert (info["split"], info["tier"], info["task_id"]) == (split, task["tier"], task["task_id"])
            assert row["raw_prompt"] == mathcode.render_chat(json.loads(info["spec"]), task)["messages"]
            assert row["raw_prompt"][1]["content"] == task["instruction"]
        assert longest_prompt(path, tokenizer, {}) <= data_config.max_prompt_length
    assert {row["extra_info"]["tier"] for row in rows} == {"T0", "T1", "T2"}
    with pytest.raises(ValueError, match="unknown domain"):
        write_verl_parquet("chess", env_frame, task_frame, tmp_path / "chess.parquet", split)
