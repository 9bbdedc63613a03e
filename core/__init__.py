"""The engine room: model layer, embedded model, cache, ledger, records, inputs, test server.

Public names are imported from their modules on first use (`moot.core.lazy`).
"""

from moot.core.lazy import lazy_exports

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "moot.core.metrics.berds": (
            "mrecall_at_k",
            "precision_at_k",
        ),
        "moot.core.llm.cache": (
            "RequestCache",
            "default_cache_path",
        ),
        "moot.core.data.debates": (
            "Debate",
            "Speech",
            "load_debates",
        ),
        "moot.core.errors": (
            "BudgetReached",
            "ConfigError",
            "ContextWindowExceeded",
            "EndpointError",
            "InputError",
            "ModelCallError",
            "MootError",
        ),
        "moot.core.validation": (
            "ConfigModel",
            "did_you_mean",
            "problem",
        ),
        "moot.core.llm.prices": (
            "Price",
            "Prices",
            "load_prices",
        ),
        "moot.core.llm.ledger": (
            "Usage",
            "UsageLedger",
        ),
        "moot.core.plan": (
            "Plan",
            "PlanItems",
            "PlanRow",
        ),
        "moot.core.llm.stand_in": (
            "StandIn",
            "json_stand_in",
            "stand_in",
        ),
        "moot.core.llm.planning": (
            "PlanningClient",
            "StandInRefused",
        ),
        "moot.core.data.planned": (
            "PlannedFiles",
            "is_planned",
            "planned_files",
        ),
        "moot.core.llm.endpoints": ("sticky",),
        "moot.core.llm.langchain": ("chat_model",),
        "moot.core.llm.router_file": ("load_router",),
        "moot.core.llm.models": (
            "Completion",
            "ModelClient",
            "RetryPolicy",
            "check_reachable",
        ),
        "moot.core.metrics.panelbench": (
            "evaluate_panelbench",
            "write_panelbench_report",
        ),
        "moot.core.metrics.perspective_diversity": ("PerspectiveDiversityScorer",),
        "moot.core.view.page": ("render_view", "write_view"),
        "moot.core.view.payload": ("view_payload",),
        "moot.core.labels": (
            "LabelField",
            "append_label",
            "check_label",
            "judge_values",
            "label_fields",
            "read_labels",
            "run_fields",
        ),
        "moot.core.data.questions": (
            "Answer",
            "Question",
            "load_answers",
            "load_partial_answers",
            "load_questions",
        ),
        "moot.core.charts": ("NEUTRAL", "PALETTE", "STYLE", "chart", "save_png"),
        "moot.core.metrics.agreement": (
            "Correlation",
            "krippendorff_alpha",
            "pearson",
            "spearman",
        ),
        "moot.core.data.compqa": (
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
        "moot.core.metrics.compqa_human": (
            "HumanTable",
            "agreement_report",
            "read_human_table",
        ),
        "moot.core.data.compqa_inputs": (
            "ArgumentFile",
            "CompQuestion",
            "load_compqa_questions",
        ),
        "moot.core.metrics.compqa_report": (
            "build_report",
            "report_markdown",
        ),
        "moot.core.data.records": (
            "ResultLog",
            "stable_id",
        ),
        "moot.core.retrieval.index": (
            "Hit",
            "Index",
            "LocalRetriever",
            "Retriever",
            "build_index",
        ),
        "moot.core.llm.spec": (
            "ModelSpec",
            "Reply",
            "Role",
            "RouterGroup",
            "Transport",
            "parse_spec",
            "register_transport",
        ),
        "moot.core.llm.structured": (
            "FreshRepair",
            "OutputParseError",
            "ParseFailure",
            "Structured",
            "parse_structured",
            "repaired_values",
        ),
        "moot.core.data.topics": (
            "Topic",
            "load_topics",
        ),
    },
)
