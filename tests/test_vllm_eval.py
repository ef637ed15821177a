"""The LLM evaluation loop: hermes-style parsing, multi-turn bookkeeping and scoring, with a scripted
engine in place of vLLM (the real engine is exercised only where vllm is importable)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from axisrl.backends.llm_eval import evaluate, parse_tool_calls
from axisrl.backends.vllm_eval import VllmEngine
from axisrl.domains import toolworld as tw
from axisrl.domains.toolworld.render import observation_json

POOL_CONFIG = {
    "seed": 0,
    "n_worlds": 3,
    "variants_per_world": 2,
    "contents_per_variant": 1,
    "reskins_per_world": 0,
    "tasks_per_env": 4,
    "placebo_contents": 0,
    "placebo_tasks_per_env": 1,
    "tables": {"min": 2, "max": 4},
    "rows_per_table": {"min": 4, "max": 8},
    "max_steps": 10,
    "heldout": {
        "seed": 1000003,
        "tasks_per_env": 3,
        "t0_envs": 2,
        "t1_envs": 2,
        "t2_worlds": 2,
        "t2_variants_per_world": 1,
        "validation_worlds": 0,
    },
}
RECORD_KEYS = {"task_id", "env_id", "tier", "success", "reward", "partial", "steps", "tool_calls", "errors"}
"""The row of ``axisrl.backends.tiny.evaluate``."""


def completion(*calls: Mapping[str, Any], thought: str = "Let me think.") -> str:
    """A completion the way Qwen3 writes one under the hermes format."""
    blocks = "".join(
        f"<tool_call>\n{json.dumps({'name': c['name'], 'arguments': c['arguments']})}\n</tool_call>" for c in calls
    )
    return f"<think>\n{thought}\n</think>\n\n{blocks}"


def script_key(conversation: Sequence[Mapping[str, Any]]) -> str:
    return conversation[0]["content"] + "\n" + conversation[1]["content"]


class ScriptedEngine:
    """Canned completions per conversation (keyed by its system and user messages), one per turn;
    an exhausted script answers with plain text. Every request is kept for inspection."""

    def __init__(self, scripts: Mapping[str, Sequence[str]]) -> None:
        self.scripts = scripts
        self.requests: list[list[list[dict[str, Any]]]] = []

    def chat(self, conversations, tools):
        self.requests.append(copy.deepcopy(list(conversations)))
        texts = []
        for conversation in conversations:
            script = self.scripts[script_key(conversation)]
            turn = sum(message["role"] == "assistant" for message in conversation)
            texts.append(script[turn] if turn < len(script) else "I am done.")
        return texts


@pytest.fixture(scope="module")
def pool() -> tw.Pool:
    return tw.generate_pool(POOL_CONFIG)


@pytest.fixture(scope="module")
def heldout(pool) -> tuple[list[dict], list[dict]]:
    """Held-out tasks whose conversations are told apart by their first two messages."""
    specs = {env["env_id"]: json.loads(env["spec"]) for env in pool.heldout_envs}
    seen, tasks = set(), []
    for task in pool.heldout_tasks:
        key = script_key(tw.render_chat(specs[task["env_id"]], task)["messages"])
        if key not in seen:
            seen.add(key)
            tasks.append(task)
    assert {task["tier"] for task in tasks} == {"T0", "T1", "T2"}
    return pool.heldout_envs, tasks


def keyed(envs: list[dict], task: Mapping[str, Any]) -> str:
    spec = json.loads(next(env["spec"] for env in envs if env["env_id"] == task["env_id"]))
    return script_key(tw.render_chat(spec, task)["messages"])


# --------------------------------------------------------------------------------------- parsing


def test_a_good_call_is_parsed_and_removed_from_the_content():
    text = completion({"name": "lookup", "arguments": {"name": "Ada", "n": 3}}, thought="Find Ada.")
    parsed = parse_tool_calls(text)
    assert parsed.calls == [{"name": "lookup", "arguments": json.dumps({"name": "Ada", "n": 3})}]
    assert parsed.malformed == 0
    assert "<tool_call>" not in parsed.content and "Find Ada." in parsed.content


def test_a_call_that_does_not_decode_is_dropped_and_counted():
    good = completion({"name": "finish", "arguments": {"answer": "7"}})
    bad_json = '<tool_call>\n{"name": "finish", "arguments": {"answer": }\n</tool_call>'
    no_arguments = '<tool_call>{"name": "finish"}</tool_call>'
    not_an_object = "<tool_call>[1, 2]</tool_call>"
    assert parse_tool_calls(bad_json).calls == [] and parse_tool_calls(bad_json).malformed == 1
    parsed = parse_tool_calls(bad_json + good + no_arguments + not_an_object)
    assert parsed.calls == [{"name": "finish", "arguments": json.dumps({"answer": "7"})}]
    assert parsed.malformed == 3


def test_text_without_a_complete_block_has_no_call():
    plain = parse_tool_calls("<think>hmm</think>The answer is 7.")
    assert (plain.calls, plain.malformed, plain.content) == ([], 0, "<think>hmm</think>The answer is 7.")
    unclosed = parse_tool_calls('<tool_call>{"name": "finish", "arguments": {}}')  # cut off by max_tokens
    assert unclosed.calls == [] and unclosed.malformed == 1


def test_several_calls_are_parsed_in_order():
    calls = [
        {"name": "a", "arguments": {}},
        {"name": "b", "arguments": {"x": [1, 2]}},
        {"name": "c", "arguments": "raw"},
    ]
    parsed = parse_tool_calls(completion(*calls))
    assert [c["name"] for c in parsed.calls] == ["a", "b", "c"]
    assert [json.loads(c["arguments"]) for c in parsed.calls] == [{}, {"x": [1, 2]}, "raw"]


# ---------------------------------------------------------------------------------- bookkeeping


def test_multi_turn_messages_follow_the_steps_and_only_the_first_call_runs(heldout):
    envs, tasks = heldout
    task = next(t for t in tasks if len(json.loads(t["reference"])) >= 3)
    reference = json.loads(task["reference"])
    key = keyed(envs, task)
    # turn 1 asks for two calls (only the first runs), turn 2 has a broken block and the second call
    broken = "<tool_call>{oops}</tool_call>"
    script = [
        completion(reference[0], reference[1]),
        broken + completion(reference[1]),
        *[completion(call) for call in reference[2:]],
    ]
    engine = ScriptedEngine({key: script})
    [row] = evaluate(engine, envs, [task], "toolworld", max_turns=len(script) + 3)

    assert row["success"] and row["reward"] == 1.0
    assert row["steps"] == len(reference) and row["tool_calls"] == len(reference) - 1
    assert row["errors"] == 1  # the broken block; no call failed
    assert len(engine.requests) == len(script)  # the episode ended at finish, nothing was asked after

    spec = json.loads(next(env["spec"] for env in envs if env["env_id"] == task["env_id"]))
    replay = tw.ToolworldEnv(spec, task)
    replay.reset()
    second_request = engine.requests[1][0]
    assert [m["role"] for m in second_request] == ["system", "user", "assistant", "tool"]
    assistant, tool = second_request[2], second_request[3]
    assert [call["function"]["name"] for call in assistant["tool_calls"]] == [reference[0]["name"]]
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == reference[0]["arguments"]
    assert tool["tool_call_id"] == assistant["tool_calls"][0]["id"]
    assert tool["content"] == observation_json(replay.step(reference[0]).observation)
    last_request = engine.requests[-1][0]
    assert len(last_request) == 2 + 2 * (len(script) - 1)
    assert len({m["tool_call_id"] for m in last_request if m["role"] == "tool"}) == len(script) - 1


def test_episodes_end_without_a_call_or_at_max_turns_and_long_results_are_truncated(heldout):
    envs, tasks = heldout
    quiet, busy = tasks[0], tasks[1]
    probe = json.loads(busy["reference"])[0]
    engine = ScriptedEngine({keyed(envs, quiet): ["No tool needed."], keyed(envs, busy): [completion(probe)] * 10})
    rows = evaluate(engine, envs, [quiet, busy], "toolworld", max_turns=3, max_tool_response_chars=5)
    assert [len(request) for request in engine.requests] == [2, 1, 1]  # the quiet one left after turn 1
    assert rows[0]["steps"] == 0 and not rows[0]["success"]
    # the third completion's call does not run: verl's max_assistant_turns ends a trajectory before it
    assert rows[1]["steps"] == 2 and rows[1]["tool_calls"] == 2 and not rows[1]["success"]
    tool_messages = [m for m in engine.requests[-1][0] if m["role"] == "tool"]
    assert all(m["content"].endswith("...(truncated)") and len(m["content"]) == 5 + 14 for m in tool_messages)


def test_an_unknown_domain_is_refused(heldout):
    envs, tasks = heldout
    with pytest.raises(ValueError, match="unknown domain"):
        evaluate(ScriptedEngine({}), envs, tasks, "chess", max_turns=1)


# -------------------------------------------------------------------------------------- scoring


def test_reference_trajectories_succeed_and_wrong_ones_fail_with_the_tiny_evaluators_rows(heldout):
    envs, tasks = heldout
    solve = ScriptedEngine({keyed(envs, t): [completion(call) for call in json.loads(t["reference"])] for t in tasks})
    solved = evaluate(solve, envs, tasks, "toolworld", max_turns=12, workers=2)
    assert all(set(row) == RECORD_KEYS for row in solved)
    assert [row["task_id"] for row in solved] == [t["task_id"] for t in tasks]
    assert [row["tier"] for row in solved] == [t["tier"] for t in tasks]
    assert all(row["success"] and row["reward"] == 1.0 and row["partial"] == 1.0 for row in solved)
    assert [row["steps"] for row in solved] == [len(json.loads(t["reference"])) for t in tasks]

    give_up = ScriptedEngine(
        {keyed(envs, t): [completion({"name": "finish", "arguments": {"answer": "no idea"}})] for t in tasks}
    )
    failed = evaluate(give_up, envs, tasks, "toolworld", max_turns=12)
    assert not any(row["success"] for row in failed) and all(row["reward"] == 0.0 for row in failed)
    assert all(row["steps"] == 1 and row["tool_calls"] == 0 for row in failed)


# --------------------------------------------------------------------------------- real engine


class FakeTokenizer:
    """A prompt is as many tokens as the JSON of its messages has characters."""

    def apply_chat_template(self, conversation, tools, add_generation_prompt, tokenize, **kwargs):
        assert add_generation_prompt and not tokenize
        return json.dumps(conversation)

    def encode(self, text, add_special_tokens):
        return list(text)


class FakeLLM:
    """Records each ``chat`` call and, like vLLM, rewrites tool-call arguments in what it is given."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def chat(self, batch, sampling_params, use_tqdm, tools, chat_template_kwargs):
        self.calls.append({"batch": batch, "tools": tools, "kwargs": chat_template_kwargs})
        for conversation in batch:
            for message in conversation:
                for call in message.get("tool_calls", []):
                    call["function"]["arguments"] = json.loads(call["function"]["arguments"])
        return [SimpleNamespace(outputs=[SimpleNamespace(text=f"reply to {c[-1]['content']}")]) for c in batch]


def test_vllm_engine_groups_by_tool_list_skips_overlong_prompts_and_leaves_the_messages_alone():
    engine = VllmEngine.__new__(VllmEngine)  # everything but the vllm.LLM it would build
    engine.llm, engine.tokenizer, engine.sampling = FakeLLM(), FakeTokenizer(), "greedy"
    engine.chat_template_kwargs, engine.max_model_len = {"enable_thinking": False}, 400
    tools_a, tools_b = [{"function": {"name": "a"}}], [{"function": {"name": "b"}}]
    call = {"id": "call_1_0", "type": "function", "function": {"name": "a", "arguments": '{"x": 1}'}}
    conversations = [
        [
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1_0", "content": "r1"},
        ],
        [{"role": "user", "content": "two"}],
        [{"role": "user", "content": "three"}],
        [{"role": "user", "content": "x" * 500}],
    ]
    before = copy.deepcopy(conversations)
    texts = engine.chat(conversations, [tools_a, tools_b, tools_a, tools_a])
    assert texts == ["reply to r1", "reply to two", "reply to three", ""]
    assert [c["tools"] for c in engine.llm.calls] == [tools_a, tools_b]
    assert [len(c["batch"]) for c in engine.llm.calls] == [2, 1]
    assert all(c["kwargs"] == {"enable_thinking": False} for c in engine.llm.calls)
    assert conversations == before


def test_the_module_imports_without_vllm():
    probe = "import sys, axisrl.backends.vllm_eval; assert 'vllm' not in sys.modules"
    subprocess.run([sys.executable, "-c", probe], check=True)


def test_vllm_engine_runs_an_episode_with_a_real_model(heldout):
    """Needs vllm and a local model directory in AXISRL_VLLM_TEST_MODEL (e.g. a small Qwen3)."""
    pytest.importorskip("vllm")
    model = os.environ.get("AXISRL_VLLM_TEST_MODEL")
    if not model:
        pytest.skip("set AXISRL_VLLM_TEST_MODEL to a local model directory")
    envs, tasks = heldout
    engine = VllmEngine(
        model,
        max_tokens=256,
        chat_template_kwargs={"enable_thinking": False},
        max_model_len=4096,
        gpu_memory_utilization=0.5,
    )
    rows = evaluate(engine, envs, tasks[:4], "toolworld", max_turns=2)
    assert [row["task_id"] for row in rows] == [t["task_id"] for t in tasks[:4]]
    assert all(set(row) == RECORD_KEYS and row["steps"] <= 2 for row in rows)
