"""The roles that speak: each module holds a role's prompts' caller and its parser.

Public names are imported from their modules on first use (`moot.core.lazy`).
"""

from moot.core.lazy import lazy_exports

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "moot.agents.debateqa_answerers": (
            "PROMPTS",
            "parse_react_step",
        ),
        "moot.agents.compqa_comparers": (
            "argument_list_messages",
            "compare",
            "comparison_messages",
            "extract_objects",
            "generate_arguments",
            "object_messages",
        ),
        "moot.agents.debatune_debaters": (
            "argument_messages",
            "opposite",
            "parse_argument_list",
            "propose_arguments",
        ),
        "moot.agents.protocol_spec": (
            "Protocol",
            "check_protocol",
            "load_protocol",
        ),
        "moot.agents.debatrix_judges": (
            "FRAMEWORKS",
            "Dimension",
            "Extractor",
            "Framework",
            "choose_dimensions",
            "winner_schema",
        ),
        "moot.agents.debatune_judges": (
            "CONTROLLABILITY",
            "QUALITY",
            "Judge",
            "Judgment",
            "PairJudgment",
            "PairScores",
            "Percentages",
            "judge_messages",
            "judge_pair",
            "pair_variables",
            "parse_scores",
            "run_judge",
        ),
        "moot.agents.label_judges": (
            "da_messages",
            "detect_perspective",
            "detection_messages",
            "judge_dispute_awareness",
        ),
        "moot.agents.compqa_rubric_judge": (
            "RubricJudgment",
            "judge_comparison",
            "rubric_messages",
        ),
        "moot.agents.berds_query_expansion": ("expand_query",),
    },
)
