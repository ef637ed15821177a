"""verl backend, episodes: the agent loop driven by scripted model turns through verl's real
ToolAgentLoop machinery (hermes parsing, continuous tokens, masks) in toolworld and mathcode, the
reward function through verl's configured loader, the same tool messages and turn limit as the
vLLM evaluation, and the launcher's reading of verl's logs."""

from __future__ import annotations

import asyncio
import copy
import json
import re
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import pytest

# verl.trainer, not verl: with tests/ on sys.path this folder is itself importable as a namespace package "verl"
pytest.importorskip(
    "verl.trainer",
    reason="verl is not installed here; run bash tests/verl/setup_venv.sh and "
    "use .venv-verl/bin/python -m pytest tests/verl",
)

import polars as pl  # noqa: E402
from verl.experimental.agent_loop.agent_loop import DictConfigWrap  # noqa: E402
from verl.trainer.ppo.reward import get_custom_reward_fn  # noqa: E402
from verl.utils import hf_tokenizer  # noqa: E402
from verl.utils.checkpoint.checkpoint_manager import should_save_ckpt_esi  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

from axisrl.backends.llm_eval import evaluate  # noqa: E402
from axisrl.backends.verl.agent_loop import AgentEpisodeLoop  # noqa: E402
from axisrl.backends.verl.config import RunLayout, VerlJob, validate_overrides  # noqa: E402
from axisrl.backends.verl.episode import CALLS_KEY, TRUNCATED, read_episode_records  # noqa: E402
from axisrl.backends.verl.launch import (  # noqa: E402
    latest_checkpoint,
    launch_env,
    main_ppo_command,
    merge_command,
    prepare,
    prompt_tokens,
    read_metrics,
    row_tools,
)
from axisrl.backends.verl.reward import compute_score  # noqa: E402
from axisrl.backends.verl.tiny_model import write_tiny_model  # noqa: E402
from axisrl.diagnostics import STEP_COLUMNS  # noqa: E402
from verl_support import small_mathcode_pool, small_pool, train_settings  # noqa: E402


class ScriptedServer:
    """verl's LLM server client, answering each turn with the next scripted text (then end of turn)."""

    def __init__(self, tokenizer, texts: list[str]) -> None:
        self.tokenizer = tokenizer
        self.texts = list(texts)
        self.prompts: list[list[int]] = []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict, **kwargs) -> TokenOutput:
        self.prompts.append(list(prompt_ids))
        text = self.texts.pop(0) + "<|im_end|>"
        return TokenOutput(token_ids=self.tokenizer.encode(text, add_special_tokens=False))


def hermes(call: dict) -> str:
    """A model turn calling one tool, as Qwen-style models write it."""
    arguments = call["arguments"] if isinstance(call["arguments"], dict) else json.loads(call["arguments"])
    payload = json.dumps({"name": call["name"], "arguments": arguments})
    return f"I will use a tool.\n<tool_call>\n{payload}\n</tool_call>"


class Prepared(NamedTuple):
    """A prepared GRPO run in one domain: its validated config, the model's tokenizer, the rows
    verl's dataset yields per split, and the run's layout."""

    cfg: Any
    tokenizer: Any
    rows: dict[str, list[dict]]
    layout: RunLayout


@pytest.fixture(scope="module")
def prepared(schema, tmp_path_factory):
    yield from _prepared(schema, tmp_path_factory, "toolworld", small_pool(schema))


@pytest.fixture(scope="module")
def prepared_mathcode(schema, tmp_path_factory):
    yield from _prepared(schema, tmp_path_factory, "mathcode", small_mathcode_pool())


def _prepared(schema, tmp_path_factory, domain: str, pool):
    import datasets

    root = tmp_path_factory.mktemp(f"verl-run-{domain}")
    with pytest.MonkeyPatch.context() as patch:  # keep the datasets Arrow cache out of ~/.cache
        patch.setattr(datasets.config, "HF_DATASETS_CACHE", str(root / "hf-datasets"))
        yield _prepare(schema, root, domain, pool)


def _prepare(schema, root: Path, domain: str, pool) -> Prepared:
    frames = {
        name: pl.DataFrame(getattr(pool, name), infer_schema_length=None)
        for name in ("envs", "tasks", "heldout_envs", "heldout_tasks")
    }
    model_dir = write_tiny_model(root / "model")
    job = VerlJob(
        model_path=str(model_dir),
        run_dir=root / "run",
        experiment_name="test-run",
        max_prompt_length=16384,
        max_response_length=8192,
        max_turns=16,
    )
    cfg = validate_overrides(
        prepare(
            train_settings(schema, "grpo"),
            job,
            (frames["envs"], frames["tasks"]),
            (frames["heldout_envs"], frames["heldout_tasks"]),
            domain,
        )
    )
    tokenizer = hf_tokenizer(str(model_dir))
    rows = {
        split: [dataset[i] for i in range(len(dataset))]
        for split, dataset in (
            ("train", RLHFDataset(str(job.layout.train_file), tokenizer, cfg.data)),
            ("heldout", RLHFDataset(str(job.layout.val_file), tokenizer, cfg.data)),
        )
    }
    return Prepared(cfg, tokenizer, rows, job.layout)


@pytest.fixture(scope="module")
def longest_task_row(prepared) -> dict:
    """The training row whose reference solution takes the most calls (a multi-turn episode)."""
    return max(prepared.rows["train"], key=lambda row: len(reference(row)))


def reference(row: dict) -> list[dict]:
    return json.loads(json.loads(row["extra_info"]["task"])["reference"])


def play(
    prepared: Prepared,
    row: dict,
    texts: list[str],
    *,
    step: int = 1,
    uid: str = "prompt-0",
    episode_dir: Path | None = None,
    cfg=None,
):
    """One trajectory of ``row`` through AgentEpisodeLoop (under ``cfg``, default the prepared
    run's), called as verl's V1 worker calls it (the dataset row plus ``global_steps``, ``uid``
    and ``session_id``); (output, server)."""
    server = ScriptedServer(prepared.tokenizer, texts)
    kwargs = {key: value for key, value in row.items() if key != "dummy_tensor"}
    cfg = prepared.cfg if cfg is None else cfg

    async def run():  # AgentLoopBase binds the running event loop when it is built
        loop = AgentEpisodeLoop(
            trainer_config=DictConfigWrap(cfg),
            server_manager=server,
            tokenizer=prepared.tokenizer,
            processor=None,
            dataset_cls=RLHFDataset,
            data_config=DictConfigWrap(cfg.data),
            hf_model_type="qwen2",
            episode_dir=str(episode_dir or prepared.layout.episode_dir),
        )
        return await loop.run({}, global_steps=step, uid=uid, session_id=0, **kwargs)

    return asyncio.run(run()), server


def score(prepared: Prepared, row: dict, output) -> dict:
    """The configured reward function, called as verl's NaiveRewardManager calls it."""
    extra_info = {**row["extra_info"], **output.extra_fields}
    return get_custom_reward_fn(prepared.cfg)(
        data_source=row["data_source"],
        ground_truth=row["reward_model"]["ground_truth"],
        solution_str=prepared.tokenizer.decode(output.response_ids, skip_special_tokens=True),
        extra_info=extra_info,
    )


def test_reference_solution_played_turn_by_turn_succeeds(prepared, longest_task_row):
    tokenizer = prepared.tokenizer
    row = longest_task_row
    calls = reference(row)
    assert len(calls) >= 3
    output, server = play(prepared, row, [hermes(call) for call in calls])

    assert not server.texts  # the episode ended at finish, the script used up
    executed = json.loads(output.extra_fields[CALLS_KEY])
    assert [(c["name"], json.loads(c["arguments"])) for c in executed] == [(c["name"], c["arguments"]) for c in calls]
    assert output.num_turns == 2 * len(calls) + 1
    assert len(output.prompt_ids) == prompt_tokens(
        row["raw_prompt"], row_tools(row), tokenizer, prepared.cfg.data.apply_chat_template_kwargs
    )
    prompt = tokenizer.decode(output.prompt_ids)
    assert '"pattern"' in prompt and '"additionalProperties"' in prompt  # full schemas reached the template
    generated = [t for t, m in zip(output.response_ids, output.response_mask) if m]
    context = [t for t, m in zip(output.response_ids, output.response_mask) if not m]
    assert "<tool_response>" not in tokenizer.decode(generated) and "<tool_call>" in tokenizer.decode(generated)
    assert tokenizer.decode(context).count("<tool_response>") == len(calls)
    last_turn = server.prompts[-1]  # the context of the last turn is a prefix of the trajectory's tokens
    assert last_turn == (output.prompt_ids + output.response_ids)[: len(last_turn)]
    assert score(prepared, row, output) == {
        "score": 1.0,
        "acc": 1.0,
        "subgoal_fraction": 1.0,
        "env_steps": float(len(calls)),
        "finished": 1.0,
    }


def test_failed_episodes_score_zero(prepared, longest_task_row):
    row = longest_task_row
    output, _ = play(
        prepared, row, [hermes({"name": "no_such_tool", "arguments": {}}), hermes({"name": "finish", "arguments": {}})]
    )
    response = prepared.tokenizer.decode(output.response_ids)
    assert '"error"' in response and "no_such_tool" in response
    result = score(prepared, row, output)
    assert (result["score"], result["acc"], result["env_steps"], result["finished"]) == (0.0, 0.0, 2.0, 1.0)
    assert result["subgoal_fraction"] < 1.0

    output, _ = play(prepared, row, ["I cannot do that."])  # no tool call: verl ends the episode
    assert output.num_turns == 2 and json.loads(output.extra_fields[CALLS_KEY]) == []
    assert score(prepared, row, output)["acc"] == 0.0


MALFORMED = 'I will use a tool.\n<tool_call>\n{"name": "finish", "arguments": }\n</tool_call>'
"""A model turn whose only tool call does not decode: verl's hermes parser drops it, ending the episode."""


def test_the_episode_log_counts_calls_turns_parse_failures_and_truncation(prepared, longest_task_row, tmp_path):
    """What the collapse diagnostics read, per trajectory: tool calls (``finish`` not counted),
    assistant turns, tool-call blocks that did not parse (a bad block beside a good one; a block
    never closed) and whether the trajectory hit ``response_length``, in a generation or in the
    tool responses after it."""
    row = longest_task_row
    calls = reference(row)
    bad_then_good = MALFORMED + "\n" + hermes(calls[0])
    unclosed = hermes(calls[1]).removesuffix("</tool_call>")
    short = copy.deepcopy(prepared.cfg)
    first_turn = len(prepared.tokenizer.encode(hermes(calls[0]) + "<|im_end|>", add_special_tokens=False))
    short.actor_rollout_ref.rollout.response_length = first_turn + 2  # no room for the tool response
    plays = [
        ([hermes(call) for call in calls], prepared.cfg),
        (["I cannot do that."], prepared.cfg),
        ([bad_then_good, unclosed], prepared.cfg),
        (["I will think about it at length. " * 40], short),  # cut in the generation
        ([hermes(calls[0])], short),  # cut when the tool response is appended
    ]
    for texts, cfg in plays:
        play(prepared, row, texts, episode_dir=tmp_path, cfg=cfg)
    counted = [
        {key: record[key] for key in ("tool_calls", "turns", "parse_failures", "truncated", "env_steps")}
        for record in read_episode_records(tmp_path)
    ]
    assert calls[0]["name"] != "finish"
    assert counted == [
        {
            "tool_calls": len(calls) - 1,
            "turns": len(calls),
            "parse_failures": 0,
            "truncated": False,
            "env_steps": len(calls),
        },
        {"tool_calls": 0, "turns": 1, "parse_failures": 0, "truncated": False, "env_steps": 0},
        {"tool_calls": 1, "turns": 2, "parse_failures": 2, "truncated": False, "env_steps": 1},
        {"tool_calls": 0, "turns": 1, "parse_failures": 0, "truncated": True, "env_steps": 0},
        {"tool_calls": 1, "turns": 1, "parse_failures": 0, "truncated": True, "env_steps": 1},
    ]


def test_reward_verifies_the_reference_of_every_task_and_rejects_a_no_op(prepared):
    for row in prepared.rows["train"] + prepared.rows["heldout"]:
        calls = json.dumps(reference(row))
        truth = row["reward_model"]["ground_truth"]
        good = compute_score("toolworld", "", truth, {**row["extra_info"], CALLS_KEY: calls})
        assert (good["score"], good["acc"]) == (1.0, 1.0)
        no_op = {**row["extra_info"], CALLS_KEY: json.dumps([{"name": "finish", "arguments": {}}])}
        bad = compute_score("toolworld", "", truth, no_op)
        assert bad["acc"] == 0.0 and bad["finished"] == 1.0
        dense = compute_score("toolworld", "", truth, no_op, reward_density="dense")
        assert dense["score"] == dense["subgoal_fraction"] < 1.0
    with pytest.raises(ValueError, match="axisrl agent loop"):
        compute_score("toolworld", "", truth, dict(row["extra_info"]))
    with pytest.raises(ValueError, match="unknown domain"):
        compute_score("chess", "", truth, {**row["extra_info"], CALLS_KEY: calls})


def python_row(prepared: Prepared) -> dict:
    """A mathcode training row under the Python harness (persistent, echoing, tagged answers)."""
    return next(
        row for row in prepared.rows["train"] if json.loads(row["extra_info"]["spec"])["harness"]["tools"] == "python"
    )


def task_of(row: dict) -> dict:
    return json.loads(row["extra_info"]["task"])


def python_call(code: str) -> dict:
    return {"name": "python", "arguments": {"code": code}}


def finish_call(answer: str) -> dict:
    return {"name": "finish", "arguments": {"answer": f"<answer>{answer}</answer>"}}


def tool_responses(prepared: Prepared, output) -> list[str]:
    """The tool messages of a trajectory, as the model read them (its context tokens)."""
    context = [t for t, m in zip(output.response_ids, output.response_mask) if not m]
    return re.findall(r"<tool_response>\n(.*?)\n</tool_response>", prepared.tokenizer.decode(context), re.DOTALL)


def test_a_mathcode_episode_played_turn_by_turn_is_scored_by_its_answer(prepared_mathcode):
    prepared = prepared_mathcode
    row = python_row(prepared)
    answer = task_of(row)["answer"]
    work = [python_call(f"answer = {answer!r}"), python_call("answer")]  # persistent state, echoed value

    output, server = play(prepared, row, [hermes(call) for call in [*work, finish_call(answer)]])
    assert not server.texts and output.num_turns == 2 * 3 + 1
    echoed = json.dumps({"output": f"{answer!r}\n"}, separators=(",", ":"))
    assert tool_responses(prepared, output) == ['{"output":""}', echoed, '{"result":"finished"}']
    assert score(prepared, row, output) == {
        "score": 1.0,
        "acc": 1.0,
        "subgoal_fraction": 1.0,
        "env_steps": 3.0,
        "finished": 1.0,
    }

    output, _ = play(prepared, row, [hermes(call) for call in [*work, finish_call(f"{answer}1")]])
    assert score(prepared, row, output) == {
        "score": 0.0,
        "acc": 0.0,
        "subgoal_fraction": 0.0,
        "env_steps": 3.0,
        "finished": 1.0,
    }


def test_mathcode_reward_verifies_every_reference_and_rejects_a_wrong_answer(prepared_mathcode):
    rows = prepared_mathcode.rows["train"] + prepared_mathcode.rows["heldout"]
    assert {json.loads(row["extra_info"]["spec"])["harness"]["tools"] for row in rows} == {"calculator", "python"}
    for row in rows:
        truth = row["reward_model"]["ground_truth"]
        good = compute_score("mathcode", "", truth, {**row["extra_info"], CALLS_KEY: json.dumps(reference(row))})
        assert (good["score"], good["acc"], good["env_steps"], good["finished"]) == (1.0, 1.0, 1.0, 1.0)
        wrong = json.dumps([finish_call(f"{task_of(row)['answer']}1")])
        bad = compute_score("mathcode", "", truth, {**row["extra_info"], CALLS_KEY: wrong}, reward_density="dense")
        assert (bad["score"], bad["acc"], bad["finished"]) == (0.0, 0.0, 1.0)


def test_a_turns_parallel_calls_step_the_environment_in_order(prepared_mathcode):
    prepared = prepared_mathcode
    row = python_row(prepared)
    cfg = copy.deepcopy(prepared.cfg)
    cfg.actor_rollout_ref.rollout.multi_turn.max_parallel_calls = 2
    two_calls = hermes(python_call("x = 5")) + "\n" + hermes(python_call("x * 2"))
    output, _ = play(prepared, row, [two_calls, "Done."], cfg=cfg)
    executed = json.loads(output.extra_fields[CALLS_KEY])
    assert [json.loads(call["arguments"])["code"] for call in executed] == ["x = 5", "x * 2"]
    assert tool_responses(prepared, output) == ['{"output":""}', '{"output":"10\\n"}']


class ReplayEngine:
    """The vLLM evaluation's engine for one conversation: the scripted completions in turn."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.requests: list[list[dict]] = []

    def chat(self, conversations, tools):
        [conversation] = conversations
        self.requests.append(copy.deepcopy(conversation))
        return [self.texts[sum(message["role"] == "assistant" for message in conversation)]]


def test_training_and_evaluation_show_the_same_tool_messages_and_stop_at_the_same_turn(prepared_mathcode):
    """Cut at the same length, and the calls of the last allowed turn never run (verl ends there)."""
    prepared = prepared_mathcode
    row = python_row(prepared)
    cfg = copy.deepcopy(prepared.cfg)
    cfg.actor_rollout_ref.rollout.multi_turn.max_tool_response_length = 20
    cfg.actor_rollout_ref.rollout.multi_turn.max_assistant_turns = 3
    answer = task_of(row)["answer"]
    texts = [
        hermes(python_call("print(list(range(40)))")),
        hermes(python_call("print('short')")),
        hermes(finish_call(answer)),
    ]

    output, _ = play(prepared, row, texts, cfg=cfg)
    trained = tool_responses(prepared, output)
    assert trained == ['{"output":"[0, 1, 2,' + TRUNCATED, '{"output":"short\\n"}']
    assert score(prepared, row, output) == {
        "score": 0.0,
        "acc": 0.0,
        "subgoal_fraction": 0.0,
        "env_steps": 2.0,
        "finished": 0.0,
    }

    engine = ReplayEngine(texts)
    envs = [{"env_id": row["extra_info"]["env_id"], "spec": row["extra_info"]["spec"]}]
    [episode] = evaluate(engine, envs, [task_of(row)], "mathcode", max_turns=3, max_tool_response_chars=20)
    evaluated = [message["content"] for message in engine.requests[-1] if message["role"] == "tool"]
    assert evaluated == trained
    assert (episode["steps"], episode["success"]) == (2, False)


def test_metrics_rows_come_from_verl_file_log_and_episode_log(prepared, longest_task_row, tmp_path):
    layout = RunLayout(tmp_path)
    row = longest_task_row
    solved = [hermes(call) for call in reference(row)]
    for step, uid, texts in ((1, "a", solved), (1, "a", ["No."]), (2, "b", ["No."]), (2, "b", [MALFORMED])):
        play(prepared, row, texts, step=step, uid=uid, episode_dir=layout.episode_dir)
    play(prepared, prepared.rows["heldout"][0], ["No."], step=2, uid="val", episode_dir=layout.episode_dir)
    logged = [{"step": 0, "data": {"val-core/toolworld/acc/mean@1": 0.0}}]
    for step in (1, 2):
        logged.append(
            {
                "step": step,
                "data": {
                    "training/global_step": step,
                    "training/epoch": 0,
                    "critic/score/mean": 0.5 / step,
                    "actor/entropy": 1.5,
                    "actor/pg_loss": -0.1,
                    "actor/grad_norm": 0.7,
                    "actor/ppo_kl": 0.01,
                    "response_length/mean": 300.0,
                    "num_turns/mean": 3.0,
                    "perf/total_num_tokens": 9000,
                    "timing_s/step": 12.5,
                    **({"val-core/toolworld/acc/mean@1": 0.25} if step == 2 else {}),
                },
            }
        )
    layout.metrics_log.write_text("".join(json.dumps(entry) + "\n" for entry in logged))

    first, second = read_metrics(layout, "grpo", "sparse", "toolworld")
    assert first["update"] == 0 and first["reward_mean"] == 0.5 and second["reward_mean"] == 0.25
    assert (first["success_mean"], first["episodes"], first["env_steps"]) == (0.5, 2, len(reference(row)))
    assert (second["success_mean"], second["episodes"], second["env_steps"]) == (0.0, 2, 0)
    assert (first["zero_variance_groups"], first["groups"]) == (0, 1)
    assert (second["zero_variance_groups"], second["groups"]) == (1, 1)
    assert (first["entropy"], first["loss"], first["grad_norm"], first["kl"]) == (1.5, -0.1, 0.7, 0.0)
    assert read_metrics(layout, "ppo", "sparse", "toolworld")[0]["kl"] == 0.01
    assert read_metrics(layout, "grpo", "sparse", "mathcode")[1]["val_success"] is None  # another domain's key
    assert (first["val_success"], second["val_success"]) == (None, 0.25)
    assert first["rollout_flops"] is None and first["synthetic_episodes"] == 0 and first["value_loss"] is None
    calls = len(reference(row)) - 1  # the solved episode's calls before its finish
    assert {key: first[key] for key in STEP_COLUMNS} == {
        "tool_calls_mean": calls / 2,
        "no_tool_call_share": 0.5,
        "turns_mean": (calls + 2) / 2,
        "parse_failures": 0,
        "truncated_share": 0.0,
    }
    assert {key: second[key] for key in STEP_COLUMNS} == {
        "tool_calls_mean": 0.0,
        "no_tool_call_share": 1.0,
        "turns_mean": 1.0,
        "parse_failures": 1,
        "truncated_share": 0.0,
    }


def test_a_slurm_job_saves_a_checkpoint_ahead_of_its_time_limit(tmp_path, monkeypatch):
    """verl's own early save sees the allocation's end through the launcher's environment."""
    run = VerlJob(model_path="/models/m", run_dir=tmp_path, experiment_name="r").layout
    for seconds_left, saves in ((100, True), (1000, False)):
        env = launch_env(run, {"SLURM_JOB_END_TIME": str(int(time.time()) + seconds_left)})
        monkeypatch.setenv(
            "MLP_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP", env["MLP_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP"]
        )
        assert should_save_ckpt_esi(max_steps_duration=300) is saves  # 100 s left: under a step + a save
    assert "MLP_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP" not in launch_env(run, {})


def test_launch_commands(tmp_path):
    run = VerlJob(model_path="/models/m", run_dir=tmp_path, experiment_name="r").layout
    env = launch_env(run, {"RAY_ADDRESS": "10.0.0.1:6379", "PATH": "/bin"})
    assert env == {
        "PATH": "/bin",
        "VERL_FILE_LOGGER_PATH": str(run.metrics_log),
        "TENSORBOARD_DIR": str(run.tensorboard_dir),
    }
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("AXISRL_MAIN_PPO", raising=False)
        assert main_ppo_command(["a=1"]) == [sys.executable, "-m", "verl.trainer.main_ppo", "a=1"]
        patch.setenv("AXISRL_MAIN_PPO", "stand_in.py")  # what the workflow tests run instead
        assert main_ppo_command(["a=1"]) == [sys.executable, "stand_in.py", "a=1"]
    (run.checkpoints / "global_step_40" / "actor").mkdir(parents=True)
    (run.checkpoints / "global_step_40" / "data.pt").write_bytes(b"")  # what verl saves last
    (run.checkpoints / "latest_checkpointed_iteration.txt").write_text("40")
    assert merge_command(latest_checkpoint(run), Path("/hf")) == [
        sys.executable,
        "-m",
        "verl.model_merger",
        "merge",
        "--backend",
        "fsdp",
        "--local_dir",
        str(run.checkpoints / "global_step_40" / "actor"),
        "--target_dir",
        "/hf",
    ]
