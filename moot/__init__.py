"""moot: multi-LLM debate simulation, debate data, training and judges.

Every command is a function here, with the command line's flags as keyword arguments and its
guarantees (`moot.api`; docs/python.md):

    >>> import moot
    >>> result = moot.debate(topics="topics.json", out="runs/debates")  # doctest: +SKIP
    >>> moot.eval.quality(responses=..., baseline=..., out=...)  # doctest: +SKIP

The building blocks under them are re-exported too. All of it lazily, so ``import moot`` (and
``moot --help``) stays fast:

    >>> from moot import ModelClient, Role, parse_spec, run_debatune  # doctest: +SKIP
"""

from __future__ import annotations

from moot.core.lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    "moot.api": (
        "call",
        "acall",
        "RunFailed",
        "RunStopped",
        "debate",
        "adebate",
        "merge_shards",
        "amerge_shards",
        "generate",
        "agenerate",
        "judge",
        "ajudge",
        "answer",
        "aanswer",
        "curate",
        "acurate",
        "compare",
        "acompare",
        "index",
        "aindex",
        "retrieve",
        "aretrieve",
        "run",
        "arun",
        "view",
        "aview",
        "protocol",
        "aprotocol",
        "collect",
        "acollect",
        "eval",
        "report",
        "data",
        "train",
        "models",
        "templates",
    ),
    "moot.result": ("Result",),
    "moot.core": (
        "BudgetReached",
        "Completion",
        "ConfigError",
        "Debate",
        "ContextWindowExceeded",
        "EndpointError",
        "InputError",
        "ModelCallError",
        "ModelClient",
        "ModelSpec",
        "MootError",
        "ParseFailure",
        "Price",
        "Prices",
        "RequestCache",
        "RetryPolicy",
        "Role",
        "Structured",
        "Topic",
        "UsageLedger",
        "evaluate_panelbench",
        "load_debates",
        "load_prices",
        "load_topics",
        "parse_spec",
        "write_panelbench_report",
        "Index",
        "LocalRetriever",
        "PerspectiveDiversityScorer",
        "build_index",
        "load_answers",
        "load_partial_answers",
        "load_questions",
        "load_comparisons",
        "load_judged",
        "load_compqa_questions",
        "build_report",
    ),
    "moot.graphs": (
        "DebateRunConfig",
        "JudgeSettings",
        "RunSummary",
        "Shard",
        "build_protocol_graph",
        "debatune_protocol",
        "run_protocol",
        "build_judge_graph",
        "judge_debates",
        "merge_runs",
        "run_debatune",
        "AnswerContext",
        "answer_questions",
        "Judging",
        "evaluate_berds",
        "evaluate_detector",
        "evaluate_dispute_awareness",
        "CompareContext",
        "compare_questions",
        "evaluate_compqa",
        "load_answer_files",
    ),
    "moot.training": (
        "SFTRunConfig",
        "build_trainer",
        "distill_compqa",
        "instruction",
        "load_sft_config",
        "load_sft_dataset",
        "merge_adapter",
        "mix_datasets",
        "sft_record",
        "train_sft",
        "write_sft_dataset",
    ),
}
__getattr__, __all__ = lazy_exports(__name__, _EXPORTS)
