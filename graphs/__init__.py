"""LangGraph state machines wiring the agents together.

Public names are imported from their modules on first use (`moot.core.lazy`).
"""

from moot.core.lazy import lazy_exports

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "moot.graphs.answer": (
            "AnswerContext",
            "answer_questions",
            "build_answer_graph",
        ),
        "moot.graphs.compare": (
            "CompareContext",
            "build_compare_graph",
            "compare_questions",
        ),
        "moot.graphs.compqa_eval": (
            "evaluate_compqa",
            "load_answer_files",
        ),
        "moot.graphs.curation": (
            "CurateContext",
            "build_curate_graph",
            "curate",
        ),
        "moot.graphs.debate": (
            "DebateContext",
            "DebateState",
            "build_debate_graph",
        ),
        "moot.graphs.debatrix": (
            "JudgeContext",
            "JudgeState",
            "build_judge_graph",
        ),
        "moot.graphs.debatune": (
            "DebateRunConfig",
            "RunSummary",
            "Shard",
            "merge_runs",
            "run_debatune",
        ),
        "moot.graphs.judge_run": (
            "JudgeRunSummary",
            "JudgeSettings",
            "judge_debates",
        ),
        "moot.graphs.qa_eval": (
            "evaluate_berds",
            "evaluate_detector",
            "evaluate_dispute_awareness",
        ),
    },
)
