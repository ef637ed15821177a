"""The vLLM engine of the held-out evaluation loop (``axisrl.backends.llm_eval``).

vLLM is imported by ``VllmEngine`` only: it needs its own environment (``envs/eval-vllm.yaml``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from axisrl.backends.llm_eval import Message
from axisrl.domains.canon import canonical_json


class VllmEngine:
    """Greedy ``vllm.LLM.chat`` with tool schemas rendered by the model's chat template.

    ``LLM.chat`` takes one tool list per call, so each turn makes one call per distinct tool list
    (toolworld: one per environment; mathcode: one per harness). A conversation whose prompt no
    longer fits ``max_model_len`` gets an empty completion, which ends its episode (verl ends a
    trajectory at its response budget the same way) instead of failing the whole batch."""

    def __init__(
        self, model: str, max_tokens: int, chat_template_kwargs: Mapping[str, Any] | None = None, **llm_kwargs: Any
    ) -> None:
        from vllm import LLM, SamplingParams

        self.llm = LLM(model=model, **llm_kwargs)
        self.sampling = SamplingParams(temperature=0.0, max_tokens=max_tokens)
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.tokenizer = self.llm.get_tokenizer()
        self.max_model_len: int = self.llm.llm_engine.model_config.max_model_len

    def prompt_tokens(self, conversation: list[Message], tools: list[dict[str, Any]]) -> int:
        text = self.tokenizer.apply_chat_template(
            conversation, tools=tools, add_generation_prompt=True, tokenize=False, **self.chat_template_kwargs
        )
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def chat(self, conversations: Sequence[list[Message]], tools: Sequence[list[dict[str, Any]]]) -> list[str]:
        texts = [""] * len(conversations)
        groups: dict[str, list[int]] = {}
        for i, (conversation, schemas) in enumerate(zip(conversations, tools)):
            if self.prompt_tokens(conversation, schemas) < self.max_model_len:
                groups.setdefault(canonical_json(schemas), []).append(i)
        for indices in groups.values():
            # vLLM rewrites tool-call arguments in the messages it is given; ours stay JSON strings
            batch = [copy.deepcopy(conversations[i]) for i in indices]
            outputs = self.llm.chat(
                batch,
                self.sampling,
                use_tqdm=False,
                tools=tools[indices[0]],
                chat_template_kwargs=self.chat_template_kwargs,
            )
            for i, output in zip(indices, outputs):
                texts[i] = output.outputs[0].text
        return texts
