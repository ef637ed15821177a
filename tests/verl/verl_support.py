"""Helpers for the verl tests: a tiny local Qwen2 model directory and tiny toolworld and mathcode pools.

Nothing can be downloaded, so the model directory is made here: a byte-level tokenizer (every
byte one token, no merges: any text round-trips, which scripted tool calls need) with Qwen's
ChatML special tokens and a Qwen2.5-style chat template (tools in the system turn, hermes
``<tool_call>`` turns, tool results in ``<tool_response>``), and a one-layer Qwen2 config. No
weights: verl's config validation and dataset read only the config and the tokenizer. (Not a
conftest.py: a second top-level ``conftest`` module would displace tests/conftest.py, and a package
here would be named ``verl`` and shadow the real one.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from axisrl.backends.verl.config import VerlJob
from axisrl.config import validate_config
from axisrl.domains import mathcode, toolworld
from axisrl.plan import backend_settings

CHAT_TEMPLATE = """\
{%- if tools %}
{{- '<|im_start|>system\\n' }}
{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}
{{- '# Tools\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}
{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}
{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within \
<tool_call></tool_call> XML tags:\\n<tool_call>\\n{"name": <function-name>, "arguments": <args-json-object>}\\n\
</tool_call><|im_end|>\\n' }}
{%- elif messages[0].role == 'system' %}
{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role == 'user' or (message.role == 'assistant' and not message.tool_calls) %}
{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}
{%- elif message.role == 'assistant' %}
{{- '<|im_start|>assistant' }}{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}
{%- for tool_call in message.tool_calls %}
{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}
{{- '\\n<tool_call>\\n{"name": "' + tool_call.name + '", "arguments": ' }}
{%- if tool_call.arguments is string %}{{- tool_call.arguments }}
{%- else %}{{- tool_call.arguments | tojson }}{%- endif %}
{{- '}\\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\\n' }}
{%- elif message.role == 'tool' %}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}
{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}
"""

POOL_CONFIG = {
    "n_worlds": 2,
    "variants_per_world": 1,
    "contents_per_variant": 1,
    "reskins_per_world": 0,
    "tasks_per_env": 3,
    "heldout": {
        "tasks_per_env": 2,
        "t0_envs": 1,
        "t1_envs": 1,
        "t2_worlds": 1,
        "t2_variants_per_world": 1,
        "validation_worlds": 0,
    },
}


def small_pool(schema: dict[str, Any]) -> toolworld.Pool:
    """Two worlds, three tasks each, and a held-out pool with one environment per tier (no placebo)."""
    cfg = validate_config({"synthesize": POOL_CONFIG}, schema)["synthesize"]
    return toolworld.generate_pool({**cfg, "placebo_contents": 0})


MATHCODE_POOL_CONFIG = {
    "seed": 0,
    "tasks_per_env": 2,
    "contents_per_variant": 1,
    "max_steps": 4,
    "placebo_contents": 0,
    "placebo_tasks_per_env": 1,
    "mathcode": {
        "generators": ["basic_arithmetic", "gcd"],
        "heldout_generators": ["lcm"],
        "tools": ["calculator", "python"],
        "python_states": ["persistent"],
        "python_outputs": ["echo"],
        "grammars": ["tagged"],
        "python_timeout_s": 5,
    },
    "heldout": {
        "seed": 1000003,
        "tasks_per_env": 1,
        "t0_envs": 1,
        "t1_envs": 1,
        "t2_worlds": 1,
        "t2_variants_per_world": 1,
    },
}
"""Two generators under a calculator and a persistent, echoing Python harness with tagged answers: three
training environments of two problems each and one held-out problem per tier (about two seconds)."""


def small_mathcode_pool() -> toolworld.Pool:
    return mathcode.generate_pool(MATHCODE_POOL_CONFIG)


def train_settings(
    schema: dict[str, Any], algo: str, reward_density: str = "sparse", d_traj: int = 4
) -> dict[str, Any]:
    """What the plan hands a backend for a design: the schema's train defaults resolved for it."""
    design = {"budget": "fixed_visits", "algo": algo, "width": 64, "d_traj": d_traj, "reward_density": reward_density}
    return backend_settings(validate_config({}, schema)["train"], design)


def write_tiny_model(directory: Path) -> Path:
    """A loadable local HF model directory (config and tokenizer, no weights)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    backend = Tokenizer(models.BPE(vocab={symbol: i for i, symbol in enumerate(alphabet)}, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
    )
    tokenizer.add_tokens(["<tool_call>", "</tool_call>"])
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(directory)
    Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=32768,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        architectures=["Qwen2ForCausalLM"],
    ).save_pretrained(directory)
    return directory


def tiny_job(model_dir: Path, run_dir: Path, **changes: Any) -> VerlJob:
    """A verl job on the tiny model, sized for a CPU test (``changes`` override any field)."""
    fields = {
        "model_path": str(model_dir),
        "run_dir": run_dir,
        "experiment_name": "test-run",
        "num_cpus": 4,
        "max_prompt_length": 16384,
        "micro_batch_size_per_gpu": 2,
    }
    return VerlJob(**(fields | changes))
