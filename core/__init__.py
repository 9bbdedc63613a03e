"""The engine room: model layer, embedded model, cache, ledger, records, inputs, test server.

Public names are imported from their modules on first use (`moot.core.lazy`).
"""

from moot.core.lazy import lazy_exports

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "moot.core.berds_metrics": (
            "mrecall_at_k",
            "precision_at_k",
        ),
        "moot.core.cache": (
            "RequestCache",
            "default_cache_path",
        ),
        "moot.core.debates": (
            "Debate",
            "Speech",
            "load_debates",
        ),
        "moot.core.errors": (
            "ConfigError",
            "ContextWindowExceeded",
            "EndpointError",
            "InputError",
            "ModelCallError",
            "MootError",
        ),
        "moot.core.ledger": (
            "Usage",
            "UsageLedger",
        ),
        "moot.core.models": (
            "Completion",
            "ModelClient",
            "RetryPolicy",
            "check_reachable",
        ),
        "moot.core.panelbench": (
            "evaluate_panelbench",
            "write_panelbench_report",
        ),
        "moot.core.perspective_diversity": ("PerspectiveDiversityScorer",),
        "moot.core.qa_data": (
            "Answer",
            "Question",
            "load_answers",
            "load_partial_answers",
            "load_questions",
        ),
        "moot.core.agreement": (
            "krippendorff_alpha",
            "pearson",
            "spearman",
        ),
        "moot.core.compqa": (
            "CRITERIA",
            "MAXIMA",
            "MAX_SCORE",
            "Comparison",
            "Judged",
            "RubricError",
            "check_scores",
            "load_comparisons",
            "load_judged",
            "parse_scores",
        ),
        "moot.core.compqa_human": (
            "HumanTable",
            "agreement_report",
            "read_human_table",
        ),
        "moot.core.compqa_inputs": (
            "ArgumentFile",
            "CompQuestion",
            "load_compqa_questions",
        ),
        "moot.core.compqa_report": (
            "build_report",
            "report_markdown",
        ),
        "moot.core.records": (
            "ResultLog",
            "stable_id",
        ),
        "moot.core.retrieval": (
            "Hit",
            "Index",
            "LocalRetriever",
            "Retriever",
            "build_index",
        ),
        "moot.core.spec": (
            "ModelSpec",
            "Role",
            "parse_spec",
        ),
        "moot.core.structured": (
            "OutputParseError",
            "ParseFailure",
            "Structured",
            "parse_structured",
        ),
        "moot.core.topics": (
            "Topic",
            "load_topics",
        ),
    },
)
