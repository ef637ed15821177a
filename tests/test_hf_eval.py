"""The transformers engine of the evaluation loop, on CPU with a tiny Qwen2 built here (nothing is
downloaded): the bookkeeping, not the skill. The model is randomly initialised, then its embeddings
and output head are set so that it answers every turn with one known hermes tool call, which the
loop must parse, step in the environment and score exactly as it does the same text from a
scripted engine; the context length and completion budget are checked on its prompts' real token
counts. The evaluate stage is run with ``evaluate.backend: hf`` as the workflow configures it."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import torch
from test_vllm_eval import POOL_CONFIG, RECORD_KEYS, ScriptedEngine, keyed
from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

from axisrl.artifacts import read_artifact, write_artifact
from axisrl.backends.hf_eval import HfEngine, chat_messages
from axisrl.backends.llm_eval import evaluate
from axisrl.backends.verl.tiny_model import write_tiny_model
from axisrl.config import GPU_BACKENDS, ConfigError, StageSpec, load_config, validate_config
from axisrl.domains import toolworld as tw
from axisrl.domains.toolworld.model import FINISH
from axisrl.stages import STAGES, study
from axisrl.stages.gpu import ENGINES
from axisrl.stages.gpu import evaluate as evaluate_stage
from conftest import DEFAULT_CONFIG, ROOT, SCHEMA_PATH

SMALL_POOL = {**POOL_CONFIG, "tables": {"min": 1, "max": 1}, "rows_per_table": {"min": 2, "max": 3}}
"""One table per world: prompts of about 3,500 byte-level tokens, quick on a CPU."""
STUDY_8B = ROOT / "config" / "studies" / "qwen3-8b.yaml"


@pytest.fixture(scope="module")
def pool() -> tw.Pool:
    return tw.generate_pool(SMALL_POOL)


@pytest.fixture(scope="module")
def tasks(pool) -> list[dict[str, Any]]:
    """A task whose first reference step is a lookup (the model's call), and one of another
    environment."""
    first = next(t for t in pool.heldout_tasks if json.loads(t["reference"])[0]["name"] != FINISH)
    other = next(t for t in pool.heldout_tasks if t["env_id"] != first["env_id"])
    return [first, other]


@pytest.fixture(scope="module")
def call(tasks) -> dict[str, Any]:
    return json.loads(tasks[0]["reference"])[0]


@pytest.fixture(scope="module")
def answer(call) -> str:
    """What the model answers every turn with (the hermes format, end-of-turn stripped)."""
    return f"<tool_call>{json.dumps(call)}</tool_call>"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, call) -> Path:
    """The verl tests' byte-level tokenizer with the call's JSON as one more token, and a two-layer
    Qwen2 that continues any prompt ending in a newline (every generation prompt does) with
    ``<tool_call>``, the call, ``</tool_call>`` and end of turn. Its weights are random but for the
    embeddings and output head: every token's embedding points at end of turn, and each token of
    that chain also along a direction of its own, which the head maps, three times as strongly,
    to the next token of the chain; the attention and MLP blocks, random, add little beside them."""
    directory = write_tiny_model(tmp_path_factory.mktemp("hf-model"))
    tokenizer = AutoTokenizer.from_pretrained(directory)
    tokenizer.add_tokens([json.dumps(call)])
    tokenizer.save_pretrained(directory)
    newline = tokenizer.encode("\n", add_special_tokens=False)
    chain = newline + tokenizer.convert_tokens_to_ids(["<tool_call>", json.dumps(call), "</tool_call>", "<|im_end|>"])
    assert len(newline) == 1 and tokenizer.unk_token_id not in chain
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=32768,
        tie_word_embeddings=False,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen2ForCausalLM(config)
    scale = 20.0
    with torch.no_grad():
        embedding, head = model.model.embed_tokens.weight, model.lm_head.weight
        embedding.zero_()
        head.zero_()
        embedding[:, 0] = scale
        head[tokenizer.eos_token_id, 0] = 1.0
        for k, (token, following) in enumerate(zip(chain, chain[1:]), start=1):
            embedding[token, k] = scale
            head[following, k] = 3.0
    model.save_pretrained(directory)
    return directory


def engine_of(model_dir: Path, **options: Any) -> HfEngine:
    settings = {"max_tokens": 16, "max_model_len": 32768, "dtype": "float32", "device": "cpu", "batch_size": 2}
    return HfEngine(str(model_dir), chat_template_kwargs={"enable_thinking": False}, **{**settings, **options})


def chat_of(pool: tw.Pool, task: dict[str, Any]) -> dict[str, Any]:
    """The task's first messages and its tool schemas."""
    spec = json.loads(next(env["spec"] for env in pool.heldout_envs if env["env_id"] == task["env_id"]))
    return tw.render_chat(spec, task)


def test_the_models_call_is_stepped_and_scored_as_the_same_text_from_a_scripted_engine(pool, tasks, answer, model_dir):
    envs = pool.heldout_envs
    engine = engine_of(model_dir)
    rows = evaluate(engine, envs, tasks, "toolworld", max_turns=3)
    scripted = ScriptedEngine({keyed(envs, task): [answer] * 3 for task in tasks})
    assert rows == evaluate(scripted, envs, tasks, "toolworld", max_turns=3)
    assert [row["task_id"] for row in rows] == [task["task_id"] for task in tasks]
    assert all(set(row) == RECORD_KEYS for row in rows)
    # the lookup runs on turns 1 and 2 (not on the last): two steps, two tool calls, no error where it exists
    assert rows[0]["steps"] == 2 and rows[0]["tool_calls"] == 2 and rows[0]["errors"] == 0
    assert rows[1]["steps"] == 2 and rows[1]["errors"] == 2  # another environment has no such tool

    assert [len(request) for request in scripted.requests] == [2, 2, 2]
    asked = [
        engine.prompt_ids(conversation, chat_of(pool, task)["tools"])
        for request in scripted.requests
        for conversation, task in zip(request, tasks)
    ]
    assert engine.usage.prompt_tokens == sum(len(ids) for ids in asked)
    assert engine.usage.completion_tokens == 6 * 4  # <tool_call>, the call, </tool_call>, end of turn
    assert engine.usage.overlong_prompts == 0
    assert len(asked[2]) > len(asked[0])  # turn 2's prompt holds turn 1's call and its tool response


def test_a_prompt_at_the_context_length_gets_no_completion_and_a_completion_stops_where_it_is_full(
    pool, tasks, model_dir
):
    engine = engine_of(model_dir)
    lengths = [len(engine.prompt_ids(chat["messages"], chat["tools"])) for chat in (chat_of(pool, t) for t in tasks)]
    short, long = sorted(range(2), key=lambda i: lengths[i])
    assert lengths[long] >= lengths[short] + 2
    engine = engine_of(model_dir, max_model_len=lengths[short] + 2)
    rows = evaluate(engine, pool.heldout_envs, tasks, "toolworld", max_turns=3)
    # two tokens fit: <tool_call> and the call, unclosed, so no call (counted as malformed) and the episode ends
    assert (rows[short]["steps"], rows[short]["errors"]) == (0, 1)
    assert (rows[long]["steps"], rows[long]["errors"]) == (0, 0)  # an empty completion: the episode ends
    assert (engine.usage.overlong_prompts, engine.usage.completion_tokens) == (1, 2)
    assert engine.usage.prompt_tokens == lengths[short]


def test_each_completion_of_a_batch_stops_at_its_own_budget_in_order(pool, tasks, call, answer, model_dir):
    prompts = [chat_of(pool, task)["messages"] for task in tasks]
    tools = [chat_of(pool, task)["tools"] for task in tasks]
    assert engine_of(model_dir, max_tokens=2).chat(prompts, tools) == [f"<tool_call>{json.dumps(call)}"] * 2
    # one generate call: the longer prompt leaves room for one token, the shorter for all four
    lengths = [len(ids) for ids in map(engine_of(model_dir).prompt_ids, prompts, tools)]
    short, long = sorted(range(2), key=lambda i: lengths[i])
    assert lengths[long] >= lengths[short] + 3
    texts = engine_of(model_dir, max_model_len=lengths[long] + 1).chat(prompts, tools)
    assert (texts[short], texts[long]) == (answer, "<tool_call>")


def test_the_messages_reach_the_template_with_their_arguments_decoded_as_vllm_hands_them():
    call = {"id": "call_1_0", "type": "function", "function": {"name": "a", "arguments": '{"x": [1, 2]}'}}
    conversation = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "", "tool_calls": [call]}]
    before = copy.deepcopy(conversation)
    messages = chat_messages(conversation)
    assert messages[1]["tool_calls"][0]["function"]["arguments"] == {"x": [1, 2]}
    assert conversation == before


# ------------------------------------------------------------------------------------ workflow


def hf_study(schema: dict[str, Any], **hf: Any) -> dict[str, Any]:
    """The 8B study, evaluated with the hf engine (``hf``: its settings)."""
    config = load_config(DEFAULT_CONFIG, STUDY_8B, schema_path=SCHEMA_PATH)
    config["evaluate"] = {**config["evaluate"], "backend": "hf", "hf": hf}
    return validate_config(config, schema)


def evaluate_keys(config: dict[str, Any], schema: dict[str, Any]) -> dict[str, str]:
    return {job: point.evaluate.key for job, point in study(config, schema).points.items()}


def test_every_evaluate_backend_of_verl_has_an_engine(schema):
    enum = schema["properties"]["evaluate"]["properties"]["backend"]["enum"]
    assert set(ENGINES) == set(GPU_BACKENDS["verl"]) == set(enum) - {"tiny"}


def test_an_engines_settings_move_only_its_own_evaluate_keys(schema):
    vllm = load_config(DEFAULT_CONFIG, STUDY_8B, schema_path=SCHEMA_PATH)
    other_engine = copy.deepcopy(vllm)
    other_engine["evaluate"]["hf"]["max_tokens"] = 7
    assert evaluate_keys(other_engine, schema) == evaluate_keys(vllm, schema)

    hf = evaluate_keys(hf_study(schema), schema)
    assert set(hf.values()).isdisjoint(evaluate_keys(vllm, schema).values())
    assert evaluate_keys(hf_study(schema, device="cuda:1", batch_size=32), schema) == hf  # speed only
    moved = evaluate_keys(hf_study(schema, dtype="float32"), schema)
    assert set(moved.values()).isdisjoint(hf.values())


def test_a_tiny_train_study_is_not_evaluated_with_hf(schema):
    with pytest.raises(ConfigError, match="evaluate.backend: hf needs train.backend verl"):
        validate_config({"evaluate": {"backend": "hf"}}, schema)


def test_the_evaluate_stage_plays_each_seeds_model_with_the_hf_engine(tmp_path, schema, pool, tasks, answer, model_dir):
    """Settings and key as the workflow builds them; the seeds without a model have no episodes."""
    config = hf_study(schema, dtype="float32", device="cpu", max_tokens=16)
    config["domain"] = "toolworld"
    config["train"]["llm"]["max_turns"] = 3
    point = next(iter(study(config, schema).points.values()))
    settings = STAGES["evaluate"].settings(config, design=point.design, seeds=point.seeds)
    assert settings["evaluate"] == {"backend": "hf", "seed": 0, "hf": config["evaluate"]["hf"]}

    dedup = StageSpec("dedup", {})
    kept = {task["task_id"] for task in tasks}
    write_artifact(pl.DataFrame(pool.heldout_envs), tmp_path / "heldout_envs.parquet", dedup)
    heldout_tasks = pl.DataFrame(pool.heldout_tasks).with_columns(keep=pl.col("task_id").is_in(kept))
    write_artifact(heldout_tasks, tmp_path / "heldout_tasks.parquet", dedup)
    without = [tmp_path / f"untrained{seed}" for seed in point.seeds[1:]]
    for directory in without:
        directory.mkdir()
    inputs = {
        "heldout_envs": str(tmp_path / "heldout_envs.parquet"),
        "heldout_tasks": str(tmp_path / "heldout_tasks.parquet"),
        "models": [str(model_dir), *map(str, without)],
    }
    outputs = {"episodes": str(tmp_path / "episodes.parquet")}
    evaluate_stage(point.evaluate, settings, inputs, outputs)

    episodes = read_artifact(outputs["episodes"], "evaluate").to_dicts()
    ordered = [task for task in pool.heldout_tasks if task["task_id"] in kept]
    scripted = ScriptedEngine({keyed(pool.heldout_envs, task): [answer] * 3 for task in ordered})
    expected = evaluate(scripted, pool.heldout_envs, ordered, "toolworld", max_turns=3)
    assert episodes == [{"run_key": point.run_keys[0], "seed": point.seeds[0], **row} for row in expected]
