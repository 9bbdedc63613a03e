"""Dense retriever families (BERDS Section 5): tiny random encoders built from configs, offline."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from moot.core.errors import ConfigError
from moot.core.retrieval.embeddings import Embedder
from moot.core.retrieval.index import LocalRetriever, build_index
from tests.tiny import tiny_bert, tiny_dpr

pytestmark = pytest.mark.torch  # a tiny torch model: out of make test-fast


def hidden_states(folder: Path, texts: list[str]):  # noqa: ANN201 - per text, unpadded
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(folder), AutoModel.from_pretrained(folder)
    with torch.no_grad():
        return [model(**tokenizer(t, return_tensors="pt")).last_hidden_state[0] for t in texts]


def test_contriever_mean_pools_the_unpadded_tokens(tmp_path):
    folder = tiny_bert(tmp_path / "bert")
    texts = ["voting", "should voting be compulsory", "free choice"]  # padded in one batch
    vectors = Embedder(f"contriever:{folder}").encode(texts)
    expected = [h.mean(0).numpy() for h in hidden_states(folder, texts)]
    np.testing.assert_allclose(vectors, np.stack(expected), rtol=1e-5, atol=1e-6)
    assert not np.allclose(np.linalg.norm(vectors, axis=1), 1.0)  # inner product, as Contriever
    queries = Embedder(f"contriever:{folder}").encode_queries(texts)
    np.testing.assert_array_equal(queries, vectors)  # one shared encoder


def test_cls_pooling_takes_the_first_token(tmp_path):
    folder = tiny_bert(tmp_path / "bert")
    texts = ["voting raises turnout", "free"]
    expected = np.stack([h[0].numpy() for h in hidden_states(folder, texts)])
    np.testing.assert_allclose(Embedder(f"cls:{folder}").encode(texts), expected, atol=1e-5)


def test_dpr_encodes_passages_and_questions_with_their_own_encoders(tmp_path):
    import torch
    import transformers

    passages = tiny_dpr(tmp_path / "ctx", "DPRContextEncoder", seed=1)
    questions = tiny_dpr(tmp_path / "question", "DPRQuestionEncoder", seed=2)
    embedder = Embedder(f"dpr:{passages},{questions}")
    text = ["should voting be compulsory"]
    tokenizer = transformers.AutoTokenizer.from_pretrained(passages)
    with torch.no_grad():
        ctx = transformers.DPRContextEncoder.from_pretrained(passages)(
            **tokenizer(text, return_tensors="pt")
        )
        question = transformers.DPRQuestionEncoder.from_pretrained(questions)(
            **tokenizer(text, return_tensors="pt")
        )
    np.testing.assert_allclose(embedder.encode(text), ctx.pooler_output.numpy(), atol=1e-5)
    np.testing.assert_allclose(
        embedder.encode_queries(text), question.pooler_output.numpy(), atol=1e-5
    )
    assert not np.allclose(embedder.encode(text), embedder.encode_queries(text))


def test_a_dpr_index_ranks_passages_by_inner_product_with_the_question_vector(tmp_path):
    passages = tiny_dpr(tmp_path / "ctx", "DPRContextEncoder", seed=1)
    questions = tiny_dpr(tmp_path / "question", "DPRQuestionEncoder", seed=2)
    name = f"dpr:{passages},{questions}"
    docs = tmp_path / "docs.jsonl"
    texts = ["compulsory voting raises turnout", "voting is a free choice", "turnout falls"]
    docs.write_text(
        "".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts))
    )
    index = build_index(docs, tmp_path / "idx", dense=name)
    assert index.manifest["embedder"] == name
    embedder = Embedder(name)
    scores = embedder.encode(texts) @ embedder.encode_queries(["should voting be free"])[0]
    hits = LocalRetriever(index, retriever="dense").search("should voting be free", 3)
    assert [h.chunk.doc_id for h in hits] == [f"d{i}" for i in np.argsort(-scores)]
    assert [h.score for h in hits] == pytest.approx(sorted(scores, reverse=True), rel=1e-5)


def test_a_missing_encoder_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot load the encoder"):
        Embedder(f"contriever:{tmp_path / 'nothing'}")


def test_mmr_measures_document_similarity_with_its_own_embedder(tmp_path):
    from moot.core.retrieval.index import mmr

    folder = tiny_bert(tmp_path / "bert")
    docs = tmp_path / "docs.jsonl"
    texts = ["compulsory voting raises turnout", "voting free choice", "turnout falls", "free"]
    docs.write_text(
        "".join(
            json.dumps({"id": f"d{i}", "text": t, "title": "voting"}) + "\n"
            for i, t in enumerate(texts)
        )  # fmt: skip
    )
    index = build_index(docs, tmp_path / "idx")
    retriever = LocalRetriever(index, mmr=0.5, mmr_embedder=f"cls:{folder}")
    hits = retriever.candidates("voting turnout free", 3)
    vectors = Embedder(f"cls:{folder}").encode([f"{h.chunk.text} voting" for h in hits])
    expected = mmr(hits, vectors, 0.5, 3)
    found = retriever.search("voting turnout free", 3)
    assert [h.chunk.id for h in found] == [h.chunk.id for h in expected]
    assert [h.score for h in found] == pytest.approx([h.score for h in expected])
