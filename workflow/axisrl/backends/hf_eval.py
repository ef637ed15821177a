"""The ``transformers`` engine of the held-out evaluation loop (``axisrl.backends.llm_eval``): the
vLLM engine's completions where vLLM is not installed (one GPU, or a CPU for a tiny model).

It renders each conversation with the model's chat template as vLLM's ``LLM.chat`` does (tool
schemas in, tool-call arguments decoded to objects, the generation prompt added, no extra special
tokens), decodes greedily, and honours the same context length: a prompt that reaches
``max_model_len`` gets an empty completion (its episode ends) and a completion stops where prompt
and completion fill it.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

from axisrl.backends.llm_eval import Message


@dataclass
class GenerationUsage:
    """What the engine has generated so far, and in how long: its throughput on a machine."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    overlong_prompts: int = 0
    """Conversations answered with an empty completion because their prompt reached ``max_model_len``."""
    seconds: float = 0.0

    @property
    def tokens_per_second(self) -> float:
        return self.completion_tokens / self.seconds if self.seconds else 0.0


def chat_messages(conversation: Sequence[Message]) -> list[Message]:
    """A copy of the conversation the way vLLM hands it to a chat template: tool-call arguments
    (JSON strings in the loop's messages) decoded to objects."""
    messages = copy.deepcopy(list(conversation))
    for message in messages:
        for call in message.get("tool_calls", []):
            call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    return messages


class HfEngine:
    """Greedy ``generate`` of a local Hugging Face causal LM, ``batch_size`` conversations at a time
    (left-padded, the shortest prompts together)."""

    def __init__(
        self,
        model: str,
        max_tokens: int,
        max_model_len: int,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        dtype: str = "auto",
        device: str = "auto",
        batch_size: int = 8,
    ) -> None:
        self.device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device)
        self.tokenizer = AutoTokenizer.from_pretrained(model)
        self.model = AutoModelForCausalLM.from_pretrained(model, dtype=dtype).to(self.device).eval()
        self.max_tokens, self.max_model_len, self.batch_size = max_tokens, max_model_len, batch_size
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        eos = self.model.generation_config.eos_token_id  # vLLM stops at these and the tokenizer's
        self.eos_ids = {self.tokenizer.eos_token_id, *([eos] if isinstance(eos, int) else eos or [])} - {None}
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else min(self.eos_ids)
        self.usage = GenerationUsage()

    def prompt_ids(self, conversation: list[Message], tools: list[dict[str, Any]]) -> list[int]:
        text = self.tokenizer.apply_chat_template(
            chat_messages(conversation),
            tools=tools,
            add_generation_prompt=True,
            tokenize=False,
            **self.chat_template_kwargs,
        )
        return self.tokenizer.encode(text, add_special_tokens=False)

    def chat(self, conversations: Sequence[list[Message]], tools: Sequence[list[dict[str, Any]]]) -> list[str]:
        prompts = [self.prompt_ids(conversation, schemas) for conversation, schemas in zip(conversations, tools)]
        fitting = sorted(
            (i for i, ids in enumerate(prompts) if len(ids) < self.max_model_len), key=lambda i: len(prompts[i])
        )
        self.usage.overlong_prompts += len(prompts) - len(fitting)
        texts = [""] * len(conversations)
        for start in range(0, len(fitting), self.batch_size):
            batch = fitting[start : start + self.batch_size]
            for i, text in zip(batch, self.generate([prompts[i] for i in batch])):
                texts[i] = text
        return texts

    def generate(self, prompts: Sequence[list[int]]) -> list[str]:
        """One greedy batch; each completion cut at its own budget (``max_tokens``, and what its
        prompt leaves of ``max_model_len``) and at its first end-of-sequence token."""
        width = max(len(ids) for ids in prompts)
        input_ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, ids in enumerate(prompts):
            input_ids[row, width - len(ids) :] = torch.tensor(ids)
            attention_mask[row, width - len(ids) :] = 1
        budgets = [min(self.max_tokens, self.max_model_len - len(ids)) for ids in prompts]
        config = GenerationConfig(  # vLLM's greedy SamplingParams: no repetition penalty from the model's defaults
            max_new_tokens=max(budgets),
            do_sample=False,
            repetition_penalty=1.0,
            eos_token_id=sorted(self.eos_ids),
            pad_token_id=self.pad_id,
        )
        started = time.perf_counter()
        with torch.inference_mode():
            output = self.model.generate(
                input_ids=input_ids.to(self.device),
                attention_mask=attention_mask.to(self.device),
                generation_config=config,
            )
        self.usage.seconds += time.perf_counter() - started
        texts = []
        for ids, budget, generated in zip(prompts, budgets, output[:, width:].tolist()):
            kept = generated[:budget]
            end = next((k for k, token in enumerate(kept) if token in self.eos_ids), None)
            kept = kept if end is None else kept[: end + 1]
            self.usage.prompt_tokens += len(ids)
            self.usage.completion_tokens += len(kept)
            texts.append(self.tokenizer.decode(kept, skip_special_tokens=True))
        return texts
