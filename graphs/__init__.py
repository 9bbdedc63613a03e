"""LangGraph state machines wiring the agents together.

Public names are imported from their modules on first use (`moot.core.lazy`).
"""

from moot.core.lazy import lazy_exports

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "moot.graphs.judging": ("EvalResult", "Judging"),
        "moot.graphs.debateqa_answer": (
            "AnswerContext",
            "AnswerSettings",
            "answer_questions",
            "build_answer_graph",
        ),
        "moot.graphs.compqa_compare": (
            "CompareContext",
            "CompareSettings",
            "build_compare_graph",
            "compare_questions",
        ),
        "moot.graphs.compqa_eval": (
            "evaluate_compqa",
            "load_answer_files",
        ),
        "moot.graphs.debateqa_curate": (
            "CurateContext",
            "CurateSettings",
            "build_curate_graph",
            "curate",
        ),
        "moot.graphs.debatune_debate": ("debatune_protocol",),
        "moot.graphs.protocol_debate": (
            "ProtocolContext",
            "ProtocolState",
            "build_protocol_graph",
        ),
        "moot.graphs.protocol_run": ("run_protocol",),
        "moot.graphs.debatrix_judging": (
            "JudgeContext",
            "JudgeState",
            "build_judge_graph",
        ),
        "moot.graphs.debatune_run": (
            "DebateRunConfig",
            "RunSummary",
            "Shard",
            "run_debatune",
        ),
        "moot.graphs.debatune_merge": ("merge_runs",),
        "moot.graphs.debatrix_run": (
            "JudgeRunSummary",
            "JudgeSettings",
            "judge_debates",
        ),
        "moot.graphs.debateqa_eval": ("evaluate_dispute_awareness",),
        "moot.graphs.berds_eval": (
            "evaluate_berds",
            "evaluate_detector",
        ),
        "moot.graphs.berds_retrieve": (
            "QueryExpansion",
            "retrieve_questions",
        ),
        "moot.graphs.debateqa_pd": ("score_answers",),
        "moot.graphs.loop": (
            "Manifest",
            "Recipe",
            "Stage",
            "load_recipe",
            "stage_key",
            "write_report",
        ),
    },
)
