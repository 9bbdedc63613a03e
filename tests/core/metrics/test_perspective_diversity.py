"""P.D. against hand-computed perplexities on a tiny random-init GPT-2 with GPT-2's tokenizer."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from moot.core.data.questions import PartialAnswer
from moot.core.errors import ConfigError
from moot.core.metrics.perspective_diversity import PartialTooLongError, PerspectiveDiversityScorer
from tests.tiny_gpt2 import tiny_gpt2

pytestmark = pytest.mark.torch  # a tiny torch model: out of make test-fast

ANSWER = (
    "Universal basic income is debated. Supporters say it reduces poverty and gives people "
    "freedom to train; critics say it is expensive and may reduce the incentive to work."
)
PARTIALS = [
    PartialAnswer("Yes, it should.", "It cuts poverty and simplifies welfare."),
    PartialAnswer("No.", "The cost would require large tax rises and could fuel inflation."),
    PartialAnswer("Only as a trial.", "Pilots show mixed results, so test it first."),
]
CHAT = (
    "{% for m in messages %}<|{{ m.role }}|>\n{{ m.content }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # a wide init, so predictions depend on the context and a misplaced token shows
    return tiny_gpt2(tmp_path_factory.mktemp("gpt2"), n_positions=128, initializer_range=0.1)


@pytest.fixture(scope="module")
def chat_gpt2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("chat")
    return tiny_gpt2(folder, n_positions=128, initializer_range=0.1, chat_template=CHAT)


def _model(folder: Path):  # an independent load, not the scorer's
    from transformers import AutoTokenizer, GPT2LMHeadModel

    return GPT2LMHeadModel.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)


def _log_probs(model, ids: list[int]) -> list[float]:
    """log p(ids[t] | ids[:t]) for t >= 1, one explicit step per token."""
    import torch

    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0]
    out = []
    for t in range(1, len(ids)):
        log_softmax = logits[t - 1].double() - torch.logsumexp(logits[t - 1].double(), -1)
        out.append(float(log_softmax[ids[t]]))
    return out


def _hand_ppl(model, prefix: list[int], target: list[int]) -> float:
    logp = _log_probs(model, prefix + target)[len(prefix) - 1 :]
    assert len(logp) == len(target)
    return math.exp(-sum(logp) / len(target))


def test_paper_plain_format_matches_hand_computation(gpt2: Path) -> None:
    model, tok = _model(gpt2)
    prefix = tok(f"user: {ANSWER} Please restate.\nassistant:")["input_ids"]
    expected = [_hand_ppl(model, prefix, tok(" " + p.text)["input_ids"]) for p in PARTIALS]
    result = PerspectiveDiversityScorer(str(gpt2)).score(ANSWER, PARTIALS)
    assert result.perplexities == pytest.approx(expected, rel=1e-5)
    assert result.pd == pytest.approx(sum(expected) / 3, rel=1e-5)  # the default is the mean
    assert len(set(round(p) for p in expected)) == 3  # the partial answers score differently
    assert not result.truncated and result.context_tokens == len(prefix)


def test_paper_chat_template_matches_hand_computation(chat_gpt2: Path) -> None:
    model, tok = _model(chat_gpt2)
    prefix = tok(f"<|user|>\n{ANSWER} Please restate.\n<|assistant|>\n")["input_ids"]
    expected = [_hand_ppl(model, prefix, tok(p.text)["input_ids"]) for p in PARTIALS]
    result = PerspectiveDiversityScorer(str(chat_gpt2)).score(ANSWER, [p.text for p in PARTIALS])
    assert result.perplexities == pytest.approx(expected, rel=1e-5)


def test_sum_is_equation_1_and_the_default_mean_is_it_over_the_partial_answers(gpt2: Path) -> None:
    mean = PerspectiveDiversityScorer(str(gpt2)).score(ANSWER, PARTIALS)
    summed = PerspectiveDiversityScorer(str(gpt2), variant="sum")
    equation_1 = summed.score(ANSWER, PARTIALS)
    assert equation_1.perplexities == mean.perplexities  # the same PPL_i, exactly
    assert equation_1.pd == math.fsum(mean.perplexities)
    assert mean.pd == math.fsum(mean.perplexities) / len(PARTIALS)
    assert equation_1.pd == pytest.approx(len(PARTIALS) * mean.pd, rel=1e-15)
    alone = [summed.score(ANSWER, [p]).pd for p in PARTIALS]  # one partial answer: mean = sum
    assert equation_1.pd == pytest.approx(sum(alone), rel=1e-5)


@pytest.mark.parametrize("batch_size", [1, 2, 8])
def test_prefix_reuse_equals_per_pair_scoring(gpt2: Path, batch_size: int) -> None:
    reuse = PerspectiveDiversityScorer(str(gpt2), batch_size=batch_size)
    pairs = PerspectiveDiversityScorer(str(gpt2), batch_size=batch_size, reuse_prefix=False)
    partials = [*PARTIALS, PartialAnswer("A", ""), PartialAnswer("Maybe.", "It " * 20)]
    for a, b in zip(
        reuse.score_many([(ANSWER, partials), ("Short answer.", PARTIALS)]),
        pairs.score_many([(ANSWER, partials), ("Short answer.", PARTIALS)]),
        strict=True,
    ):
        assert a.perplexities == pytest.approx(b.perplexities, rel=1e-4)


def test_packed_partials_of_mixed_lengths_match_hand_computation(gpt2: Path) -> None:
    # 1 to ~60 tokens, 5 partial answers over forwards of 3 and 2: each packed target must see
    # the prefix and only its own earlier tokens, at positions restarting after the prefix
    model, tok = _model(gpt2)
    partials = ["No", "It " * 30, "Yes, it cuts poverty.", "Maybe " * 12 + "not.", PARTIALS[1].text]
    prefix = tok(f"user: {ANSWER} Please restate.\nassistant:")["input_ids"]
    targets = [tok(" " + p)["input_ids"] for p in partials]
    assert len(targets[0]) == 1 and len(targets[1]) >= 30
    expected = [_hand_ppl(model, prefix, t) for t in targets]
    for batch_size in (3, 5):
        result = PerspectiveDiversityScorer(str(gpt2), batch_size=batch_size).score(
            ANSWER, partials
        )
        assert result.perplexities == pytest.approx(expected, rel=1e-5)


def test_long_answer_loses_its_start_and_is_flagged(gpt2: Path) -> None:
    model, tok = _model(gpt2)
    answer = " ".join(f"Point {i} matters." for i in range(40))  # about 160 tokens
    head, body = tok("user:")["input_ids"], tok(" " + answer)["input_ids"]
    tail = tok(" Please restate.\nassistant:")["input_ids"]
    whole = tok(f"user: {answer} Please restate.\nassistant:")["input_ids"]
    assert whole == head + body + tail  # the pieces tokenize as the whole
    targets = [tok(" " + p.text)["input_ids"] for p in PARTIALS]
    window = 64
    dropped = len(whole) + max(map(len, targets)) - window
    prefix = head + body[dropped:] + tail
    expected = [_hand_ppl(model, prefix, t) for t in targets]

    result = PerspectiveDiversityScorer(str(gpt2), max_length=window).score(answer, PARTIALS)
    assert result.truncated and result.dropped_answer_tokens == dropped
    assert result.context_tokens + max(result.partial_tokens) == window
    assert result.perplexities == pytest.approx(expected, rel=1e-5)


def test_partial_answer_longer_than_the_window_is_an_error(gpt2: Path) -> None:
    scorer = PerspectiveDiversityScorer(str(gpt2), max_length=32)
    with pytest.raises(PartialTooLongError, match="partial answer 1 has"):
        scorer.score(ANSWER, ["Fine.", "word " * 40])


def test_released_matches_hand_computation(gpt2: Path) -> None:
    model, tok = _model(gpt2)
    context = ANSWER + "<|endoftext|>"  # transformers' former GPT-2 default chat template
    len_x = len(tok(context)["input_ids"])
    expected = []
    for p in PARTIALS:
        ids = tok(context + f"{p.pov}. {p.explanation}")["input_ids"]
        nll = -sum(_log_probs(model, ids)[len_x - 1 :])
        expected.append(math.exp(nll / (len(ids) - 1)))  # context tokens in the denominator
    result = PerspectiveDiversityScorer(str(gpt2), variant="released").score(ANSWER, PARTIALS)
    assert result.perplexities == pytest.approx(expected, rel=1e-5)
    assert result.pd == pytest.approx(sum(expected) / 3, rel=1e-5)  # a mean, not a sum
    assert not result.truncated


def test_released_scores_answers_over_the_window_a_perfect_one(gpt2: Path) -> None:
    answer = " ".join(f"Point {i} matters." for i in range(40))
    result = PerspectiveDiversityScorer(str(gpt2), variant="released").score(answer, PARTIALS)
    assert result.perplexities == (1.0, 1.0, 1.0)  # the released script's quirk, reproduced
    assert result.truncated and result.scored_tokens == (0, 0, 0)


def test_bad_options_are_config_errors(gpt2: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="neither a model folder nor in the local"):
        PerspectiveDiversityScorer("no-such-org/no-such-model")
    with pytest.raises(ConfigError, match="unknown P.D. variant"):
        PerspectiveDiversityScorer(str(gpt2), variant="paper")
    with pytest.raises(ConfigError, match="max length 4096"):
        PerspectiveDiversityScorer(str(gpt2), max_length=4096)
