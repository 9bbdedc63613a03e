"""DebateQA Perspective Diversity (P.D., lower is better) with a local causal LM.

Three variants (DebateQA, Xu et al. 2024, arXiv:2408.01419):

* ``mean`` (default): each PPL_i = PPL(PA_i | c(A)) as the paper's Equations 1 and 2 define it,
  and P.D. = their MEAN over the question's partial answers. This is the scale of the paper's
  tables (Table 2: GPT-4o 3.07 with about 3.7 partial answers a question, each PPL >= 1, so
  not a sum) and the aggregation of the released script.
* ``sum``: Equation 1 literally, P.D. = sum_i PPL_i (``mean`` times the number of partial answers).
* ``released``: the released script's computation (below).

In ``mean`` and ``sum``, c(A) is the scorer's chat template applied to one user turn,
``answer + " Please restate."`` (``prompts/debateqa/perspective_diversity.j2``), with the
assistant-turn opener; PA_i = POV + " " + explanation follows as the assistant's reply and only
its tokens are scored. A tokenizer without a chat template (GPT-2) gets the plain format
`PLAIN_FORMAT` (``user: {turn}``, a newline, ``assistant:``) and PA_i is tokenized with a
leading space, as GPT-2's BPE would split the joined text. The prefix is encoded once; the partial
answers (``batch_size`` per forward) follow its KV cache packed in one row, each at positions
restarting after the prefix and masked from the others, so nothing is padded or copied per
partial answer.

Long answers: when the prefix plus the longest partial answer exceeds the window, tokens are
dropped from the START of the answer (the template and "Please restate." stay) until it fits, and
the result says how many (``dropped_answer_tokens``). A partial answer that cannot fit even with
the whole answer dropped is an error for that item (`PartialTooLongError`).

``released`` reproduces pillowsofwind/DebateQA ``scripts/eval_PD.py``: context = the chat template
of the bare answer without a generation prompt (GPT-2 has no template today; the script ran with
transformers' former GPT-2 default, each message followed by ``<|endoftext|>``), PA_i =
``POV + ". " + explanation``, the pair tokenized jointly and cut at the window from the right,
PPL = exp(sum of PA_i's NLL / all non-pad tokens but the first, context included), P.D. = the
MEAN over partial answers. An answer that fills the window leaves no PA_i token, so its
perplexity is exp(0) = 1.0, the best score; such records are flagged ``truncated``.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from moot.core.data.questions import PartialAnswer
from moot.core.errors import ConfigError, MootError
from moot.prompts import render

VARIANTS = ("mean", "sum", "released")
DEFAULT_SCORER = "gpt2"
EMBEDDED = "local/smollm2"
PLAIN_FORMAT = "user: {turn}\nassistant:"
#: transformers' GPT-2 default chat template until 4.43, which the released script relied on.
LEGACY_TEMPLATE = "{% for message in messages %}{{ message.content }}{{ eos_token }}{% endfor %}"


class PartialTooLongError(MootError):
    """A partial answer that does not fit the scorer's window even without the answer."""


@dataclass(frozen=True)
class PDResult:
    """The P.D. of one answer against its partial answers.

    Attributes:
        pd: Mean (``mean``, ``released``) or sum (``sum``) of `perplexities`; lower is better.
        perplexities: One perplexity per partial answer, in input order.
        partial_tokens: Tokens of each partial answer.
        scored_tokens: Tokens of each partial answer actually scored (fewer only in
            ``released``, which cuts at the window; 0 gives its perplexity of 1.0).
        context_tokens: Tokens of the (possibly truncated) context before the partial answer.
        dropped_answer_tokens: Answer tokens dropped from the start to fit (``mean``, ``sum``).
        truncated: Whether anything was cut to fit the window.
    """

    pd: float
    perplexities: tuple[float, ...]
    partial_tokens: tuple[int, ...]
    scored_tokens: tuple[int, ...]
    context_tokens: int
    dropped_answer_tokens: int
    truncated: bool

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (lists for tuples)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


class PerspectiveDiversityScorer:
    """Scores answers against partial answers with a causal LM in eval mode.

    The scorer runs in float32 unless `dtype` says otherwise: a perplexity in bfloat16 differs
    from the float32 one in its second or third digit, and the paper's tables are compared to
    two decimals (``docs/faithfulness.md``).

    Args:
        model: A local model folder, a Hugging Face id already in the local cache (nothing is
            downloaded), or ``local/smollm2`` (the embedded GGUF, converted once and cached).
        variant: ``mean`` (default), ``sum`` or ``released`` (see the module docstring).
        batch_size: Partial answers per forward pass.
        max_length: Window in tokens (default: the model's context length).
        reuse_prefix: Encode each answer once and reuse its KV cache (not ``released``);
            False scores every (answer, partial answer) pair as a full sequence (the baseline;
            same numbers).
        device: ``auto`` (None: CUDA if present, else the CPU), ``cpu``, ``cuda``, ``cuda:N``
            or ``mps`` (`moot.core.llm.devices`).
        dtype: ``float32`` (default), ``bfloat16``, ``float16`` or ``auto``.
        backend: ``transformers`` (default) or ``vllm`` (``mean`` and ``sum`` only: each
            pair as a full sequence, through vLLM's prompt log-probabilities).

    Raises:
        ConfigError: Unknown variant, a model that cannot be loaded offline, a bad window, a
            device that is not here, or ``released`` with vLLM.

    Example:
        >>> scorer = PerspectiveDiversityScorer("path/to/gpt2")  # doctest: +SKIP
        >>> scorer.score(answer, ["POV one. Because ...", "POV two. ..."]).pd  # doctest: +SKIP
    """

    def __init__(
        self,
        model: str = DEFAULT_SCORER,
        variant: str = "mean",
        batch_size: int = 8,
        max_length: int | None = None,
        reuse_prefix: bool = True,
        device: str | None = None,
        dtype: str | None = "float32",
        backend: str = "transformers",
    ) -> None:
        import torch

        if variant not in VARIANTS:
            raise ConfigError(
                f"unknown P.D. variant {variant!r}; choose from {', '.join(VARIANTS)}"
            )
        if batch_size < 1:
            raise ConfigError(f"batch size must be positive, got {batch_size}")
        self.name, self.variant, self.batch_size = model, variant, batch_size
        self.reuse_prefix = reuse_prefix
        self._torch = torch
        self._engine: Any = None
        if backend == "vllm":
            if variant == "released":
                raise ConfigError("--backend vllm scores --variant mean or sum, not released")
            from moot.core.llm.local_vllm import VLLMEngine

            source = scorer_source(model)
            self._engine = VLLMEngine(source, dtype, device)
            self.model, self.tokenizer = None, _load(model, source, "AutoTokenizer")
            config = _load(model, source, "AutoConfig")
        else:
            self.model, self.tokenizer = load_scorer(model, device, dtype)
            config = self.model.config
        window = getattr(config, "max_position_embeddings", None) or getattr(
            config, "n_positions", None
        )
        if max_length is not None:
            if max_length < 2 or (window and max_length > window):
                raise ConfigError(f"max length {max_length} outside 2..{window or 'any'}")
            window = max_length
        if not window:
            raise ConfigError(f"{model}: unknown context length; set max_length")
        self.window = int(window)

    def score(self, answer: str, partials: Sequence[PartialAnswer | str]) -> PDResult:
        """The P.D. of `answer` against `partials` (strings or `PartialAnswer`).

        Raises:
            PartialTooLongError: A partial answer does not fit the window (not ``released``).
        """
        if not partials:
            raise ValueError("P.D. needs at least one partial answer")
        with self._torch.inference_mode():
            if self.variant == "released":
                return self._released(answer, [_released_text(p) for p in partials])
            return self._paper(answer, [_text(p) for p in partials])

    def score_many(
        self, items: Iterable[tuple[str, Sequence[PartialAnswer | str]]]
    ) -> Iterator[PDResult]:
        """`score` over (answer, partial answers) pairs, lazily, in order."""
        for answer, partials in items:
            yield self.score(answer, partials)

    # -- mean, sum (the paper's PPL) -----------------------------------------------------------

    def _paper(self, answer: str, partials: list[str]) -> PDResult:
        tokenizer = self.tokenizer
        turn = render("debateqa/perspective_diversity.j2", answer=answer)
        if tokenizer.chat_template:
            messages = [{"role": "user", "content": turn}]
            text = tokenizer.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True
            )
            special, lead = False, ""
        else:
            text, special, lead = PLAIN_FORMAT.format(turn=turn), True, " "
        prefix = tokenizer(text, add_special_tokens=special, verbose=False)["input_ids"]
        targets = [
            tokenizer(lead + p, add_special_tokens=False, verbose=False)["input_ids"]
            for p in partials
        ]
        if not all(targets):
            raise ValueError("a partial answer has no tokens")
        excess = len(prefix) + max(map(len, targets)) - self.window
        dropped = 0
        if excess > 0:
            prefix, dropped = self._drop_answer_start(text, answer, special, excess, targets)
        if self._engine is not None:
            ppl = self._engine_pairs(prefix, targets)
        else:
            ppl = (self._reuse if self.reuse_prefix else self._pairs)(prefix, targets)
        sizes = tuple(map(len, targets))
        pd = math.fsum(ppl) if self.variant == "sum" else math.fsum(ppl) / len(ppl)
        return PDResult(pd, tuple(ppl), sizes, sizes, len(prefix), dropped, dropped > 0)

    def _drop_answer_start(
        self, text: str, answer: str, special: bool, excess: int, targets: list[list[int]]
    ) -> tuple[list[int], int]:
        if not self.tokenizer.is_fast:
            raise ConfigError(f"{self.name}: truncating long answers needs a fast tokenizer")
        encoded = self.tokenizer(
            text, add_special_tokens=special, return_offsets_mapping=True, verbose=False
        )
        start = text.find(answer)
        if start < 0:
            raise ConfigError(f"{self.name}: the chat template altered the answer text")
        end = start + len(answer)
        # overlap, not containment: byte-level BPE offsets include a word's leading space
        inside = [i for i, (a, b) in enumerate(encoded["offset_mapping"]) if a < end and b > start]
        if excess >= len(inside):
            longest = max(range(len(targets)), key=lambda i: len(targets[i]))
            raise PartialTooLongError(
                f"partial answer {longest} has {len(targets[longest])} tokens: it does not fit "
                f"the scorer's window of {self.window} tokens even without the answer"
            )
        ids = encoded["input_ids"]
        first = inside[0]
        return ids[:first] + ids[first + excess :], excess

    def _engine_pairs(self, prefix: list[int], targets: list[list[int]]) -> list[float]:
        """vLLM: each (prefix + target) as one sequence; the target's tokens are scored."""
        result: list[float] = []
        for chunk in _chunks(targets, self.batch_size):
            rows = [prefix + t for t in chunk]
            sums = self._engine.logprob_sums(rows, [len(prefix)] * len(chunk))
            result += [math.exp(-total / len(t)) for total, t in zip(sums, chunk, strict=True)]
        return result

    def _reuse(self, prefix: list[int], targets: list[list[int]]) -> list[float]:
        """Encode `prefix` once; score up to `batch_size` targets per forward over its KV cache.

        The targets of a forward are packed one after another in ONE row, each restarting its
        positions after the prefix and kept apart by a block-causal mask (each sees the prefix
        and its own earlier tokens). So the cache is neither copied per target nor padded, and
        the vocabulary projection, most of a small model's cost, runs only on the positions
        whose next token is scored (`_packed_logits`). Same numbers as `_pairs`.
        """
        torch, device = self._torch, self.model.device
        out = self.model(
            input_ids=torch.tensor([prefix], device=device), use_cache=True, logits_to_keep=1
        )
        first = out.logits[0, -1].float().log_softmax(-1)  # predicts every target's first token
        cache = out.past_key_values
        chunks = list(_chunks(targets, self.batch_size))
        totals: list[Any] = []
        for number, chunk in enumerate(chunks):
            # the forward appends the chunk to the cache: a later chunk needs the prefix alone
            kv = cache if number == len(chunks) - 1 else copy.deepcopy(cache)
            nll = self._packed_nll(kv, len(prefix), chunk)
            starts = torch.tensor([t[0] for t in chunk], device=device)
            totals.append(nll - first[starts])  # minus log p(first token | prefix)
        nll_all = torch.cat(totals).tolist()  # one transfer, not one per target
        return [math.exp(v / len(t)) for v, t in zip(nll_all, targets, strict=True)]

    def _packed_nll(self, cache: Any, size: int, chunk: list[list[int]]) -> Any:
        """Each target's NLL but its first token, the targets packed in one row after `cache`."""
        torch, device = self._torch, self.model.device
        ids = [token for target in chunk for token in target]
        width = len(ids)
        positions = torch.cat([torch.arange(size, size + len(t)) for t in chunk])
        allowed = torch.zeros(width, size + width, dtype=torch.bool)
        allowed[:, :size] = True
        keep, nexts, owner = [], [], []
        start = 0
        for row, target in enumerate(chunk):
            n = len(target)
            block = torch.ones(n, n, dtype=torch.bool).tril()
            allowed[start : start + n, size + start : size + start + n] = block
            keep += range(start, start + n - 1)  # a target's last position predicts nothing
            nexts += target[1:]
            owner += [row] * (n - 1)
            start += n
        dtype = self.model.dtype
        mask = torch.zeros(width, size + width, dtype=dtype)
        mask.masked_fill_(~allowed, torch.finfo(dtype).min)
        result = torch.zeros(len(chunk), dtype=torch.float32, device=device)
        if not keep:  # one-token targets only: the prefix scored them all
            return result
        logits = self.model(
            input_ids=torch.tensor([ids], device=device),
            attention_mask=mask[None, None].to(device),
            position_ids=positions[None].to(device),
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=torch.tensor(keep, device=device),
        ).logits[0]
        nll = torch.nn.functional.cross_entropy(
            logits.float(), torch.tensor(nexts, device=device), reduction="none"
        )
        return result.index_add_(0, torch.tensor(owner, device=device), nll)

    def _pairs(self, prefix: list[int], targets: list[list[int]]) -> list[float]:
        """Baseline: each (prefix + target) as its own sequence, right-padded in batches."""
        torch = self._torch
        result: list[float] = []
        size = len(prefix)
        for chunk in _chunks(targets, self.batch_size):
            ids, mask = _pad(torch, [prefix + t for t in chunk], device=self.model.device)
            keep = ids.shape[1] - size + 1  # logits from the prefix's last token on
            logits = self.model(input_ids=ids, attention_mask=mask, logits_to_keep=keep).logits
            for row, target in enumerate(chunk):
                n = len(target)
                lp = _logprobs(logits[row, :n], ids[row, size : size + n])
                result.append(math.exp(-float(lp.sum()) / n))
        return result

    # -- released ----------------------------------------------------------------------------

    def _released(self, answer: str, partials: list[str]) -> PDResult:
        torch, tokenizer = self._torch, self.tokenizer
        messages = [{"role": "user", "content": answer}]
        template = None if tokenizer.chat_template else LEGACY_TEMPLATE
        context = tokenizer.apply_chat_template(messages, tokenize=False, chat_template=template)
        len_x = len(tokenizer.encode(context, add_special_tokens=False, verbose=False))
        limit = min(self.window, int(tokenizer.model_max_length))
        pad = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else 0
        ppl: list[float] = []
        full: list[int] = []
        scored: list[int] = []
        for chunk in _chunks(partials, self.batch_size):
            encoded = [tokenizer(context + y, verbose=False)["input_ids"] for y in chunk]
            full += [max(0, len(e) - len_x) for e in encoded]
            ids, mask = _pad(torch, [e[:limit] for e in encoded], pad, self.model.device)
            keep = max(1, ids.shape[1] - len_x + 1)
            logits = self.model(input_ids=ids, attention_mask=mask, logits_to_keep=keep).logits
            offset = ids.shape[1] - logits.shape[1]  # logits[:, j] belongs to position offset+j
            for row in range(len(chunk)):
                length = int(mask[row].sum())
                targets = range(len_x, length)  # the script's labels that are not -100
                scored.append(len(targets))
                nll = 0.0
                if targets:
                    at = torch.tensor(targets, device=ids.device)
                    nll = -float(_logprobs(logits[row, at - 1 - offset], ids[row, at]).sum())
                ppl.append(math.exp(nll / (length - 1)))
        return PDResult(
            math.fsum(ppl) / len(ppl),
            tuple(ppl),
            tuple(full),
            tuple(scored),
            len_x,
            0,
            scored != full,
        )


def load_scorer(
    model: str, device: str | None = None, dtype: str | None = "float32"
) -> tuple[Any, Any]:
    """(model, tokenizer) in eval mode on `device` in `dtype`, from local files only.

    Args:
        model: As `PerspectiveDiversityScorer`'s.
        device: ``auto`` (None), ``cpu``, ``cuda``, ``cuda:N`` or ``mps``.
        dtype: ``float32`` (default), ``bfloat16``, ``float16`` or ``auto`` (None).

    Raises:
        ConfigError: Not a model folder and not in the local Hugging Face cache, the embedded
            model's conversion needs a missing package, or the device is not here.
    """
    from moot.core.llm.devices import choose_device, choose_dtype

    source = scorer_source(model)
    where = choose_device(device)
    options: dict[str, Any] = {"dtype": choose_dtype(dtype, where), "local_files_only": True}
    if where != "cpu":
        options["device_map"] = where
    loaded = _load(model, source, "AutoModelForCausalLM", **options)
    loaded.eval()
    return loaded, _load(model, source, "AutoTokenizer")


def scorer_source(model: str) -> str:
    """Where the scorer's files are: its folder, its hub id (cached), or the embedded one's."""
    return str(embedded_hf_folder()) if model == EMBEDDED else _resolve(model)


def _load(model: str, source: str, kind: str, **options: Any) -> Any:
    """``transformers.<kind>.from_pretrained(source)``, offline; a failure names `model`."""
    import transformers

    try:
        return getattr(transformers, kind).from_pretrained(
            source, **{"local_files_only": True, **options}
        )
    except (OSError, ValueError) as exc:
        where = "a model folder" if Path(source).is_dir() else "in the local Hugging Face cache"
        raise ConfigError(
            f"cannot load P.D. scorer {model!r} ({where}; nothing is downloaded): "
            f"{str(exc).splitlines()[0]}"
        ) from None


def scorer_identity(model: str) -> str:
    """A name that changes when the scorer's weights change (for folder claims).

    Raises:
        ConfigError: The scorer cannot be loaded offline (checked without loading it).
    """
    from moot.core.llm import embedded
    from moot.core.llm.local_hf import weights_identity

    if model == EMBEDDED:
        if importlib.util.find_spec("gguf") is None:
            embedded_hf_folder()  # raises unless the converted model is already cached
        return embedded.cache_identity()
    source = _resolve(model)
    return weights_identity(source) if Path(source).is_dir() else f"hub/{model}"


def _resolve(model: str) -> str:
    """`model` itself if it is a folder or a hub id in the local cache."""
    if Path(model).is_dir():
        return model
    from huggingface_hub import try_to_load_from_cache

    # checked first: transformers would still probe the hub for adapters, retrying for ~20 s
    if not isinstance(try_to_load_from_cache(model, "config.json"), str):
        raise ConfigError(
            f"P.D. scorer {model!r} is neither a model folder nor in the local Hugging Face "
            "cache (nothing is downloaded): pass a model folder or local/smollm2"
        )
    return model


def embedded_hf_folder() -> Path:
    """The embedded GGUF converted to a transformers folder once, under the moot cache.

    The P.D. scorer and `moot train sft` (``model.base: local/smollm2``) load it.

    Raises:
        ConfigError: The weights or the gguf package are missing.
    """
    from moot.core.data.records import atomic_replace_dir
    from moot.core.llm.cache import default_cache_path
    from moot.core.llm.embedded import weights_path

    weights = weights_path()
    folder = default_cache_path().parent / "scorers" / f"smollm2-{weights.stat().st_size}"
    if (folder / "config.json").exists():
        return folder
    if importlib.util.find_spec("gguf") is None:
        raise ConfigError("local/smollm2 as a P.D. scorer needs the gguf package: pip install gguf")

    def convert(tmp: Path) -> None:
        import torch
        import transformers

        options = {"gguf_file": weights.name}
        model = transformers.AutoModelForCausalLM.from_pretrained(
            weights.parent, dtype=torch.float32, **options
        )
        # the weights are dequantized to float32 on load; only the GGUF marker blocks saving
        model.hf_quantizer = None
        model.config.quantization_config = None
        model.save_pretrained(tmp)
        transformers.AutoTokenizer.from_pretrained(weights.parent, **options).save_pretrained(tmp)

    atomic_replace_dir(convert, folder)
    return folder


def _text(partial: PartialAnswer | str) -> str:
    return partial.text if isinstance(partial, PartialAnswer) else partial


def _released_text(partial: PartialAnswer | str) -> str:
    if isinstance(partial, PartialAnswer):
        return f"{partial.pov}. {partial.explanation}"  # the released script's format
    return partial


def _chunks(items: list, size: int) -> Iterator[list]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _pad(torch: Any, rows: list[list[int]], pad: int = 0, device: Any = None) -> tuple[Any, Any]:
    """Right-padded ids and their attention mask, on `device` (default: the CPU)."""
    width = max(map(len, rows))
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
        mask[i, : len(row)] = 1
    return ids.to(device), mask.to(device)


def _logprobs(logits: Any, targets: Any) -> Any:
    """Log-probabilities of `targets` under `logits` (one row per target), in float32."""
    return logits.float().log_softmax(-1).gather(-1, targets[:, None])[:, 0]
