"""A small Qwen2-architecture model directory written here, with no download: for machines without weights.

The tokenizer is byte-level (every byte one token, no merges: any text round-trips, which scripted tool calls
need) with Qwen's ChatML special tokens and a Qwen2.5-style chat template (tools in the system turn, hermes
``<tool_call>`` turns, tool results in ``<tool_response>``), so the agent loop, verl's hermes parser and the
evaluation engines read it as they read a real Qwen model's. Two shapes:

- ``TEST_SHAPE`` without weights: what the verl CPU tests load (verl's config validation and dataset read
  only the config and the tokenizer).
- ``SMOKE_SHAPE`` with random weights (seeded, bfloat16): what ``axisrl model tiny DIR`` writes for the GPU
  smoke check (config/studies/gpu-smoke.yaml), a model verl can train and vLLM serve: a head dimension of
  64, which flash-attention and vLLM's attention kernels take. It learns nothing useful; it checks the
  plumbing where no real model is at hand.

Needs ``transformers`` and ``tokenizers`` (and torch for weights), never verl.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

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


@dataclass(frozen=True)
class TinyShape:
    """The Qwen2 config fields that size the model (vocabulary: the tokenizer's)."""

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int


TEST_SHAPE = TinyShape(
    hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1
)
"""The verl CPU tests' model: one layer, no weights."""
SMOKE_SHAPE = TinyShape(
    hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1
)
"""The GPU smoke's model: two layers, head dimension 64 (the smallest the GPU attention kernels all take)."""


def write_tiny_model(
    directory: str | Path, shape: TinyShape = TEST_SHAPE, *, weights: bool = False, seed: int = 0
) -> Path:
    """Write the tokenizer and a Qwen2 config of ``shape`` into ``directory``; with ``weights``, also the
    model's random weights (seeded by ``seed``, bfloat16, safetensors). Without weights the files are
    exactly what the verl tests have always loaded."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config

    directory = Path(directory)
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
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        **asdict(shape),
        max_position_embeddings=32768,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        architectures=["Qwen2ForCausalLM"],
    )
    if not weights:
        config.save_pretrained(directory)
        return directory
    import torch
    from transformers import Qwen2ForCausalLM

    with torch.random.fork_rng(devices=[]):  # the caller's random state stays as it was
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model.to(torch.bfloat16).save_pretrained(directory)
    return directory
