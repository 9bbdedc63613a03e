"""The roles that speak: each module holds a role's prompts' caller and its parser."""

from moot.agents.answerers import PROMPTS, parse_react_step
from moot.agents.debaters import (
    Turn,
    conclude,
    opposite,
    parse_argument_list,
    propose_arguments,
    speak,
)
from moot.agents.debatrix import (
    FRAMEWORKS,
    Dimension,
    Extractor,
    Framework,
    choose_dimensions,
    winner_schema,
)
from moot.agents.judges import (
    CONTROLLABILITY,
    QUALITY,
    Judge,
    Judgment,
    PairJudgment,
    PairScores,
    Percentages,
    judge_pair,
    parse_scores,
    run_judge,
)
from moot.agents.perspective_judges import detect_perspective, judge_dispute_awareness
from moot.agents.query_expansion import expand_query

__all__ = [
    "PROMPTS",
    "detect_perspective",
    "expand_query",
    "judge_dispute_awareness",
    "parse_react_step",
    "CONTROLLABILITY",
    "FRAMEWORKS",
    "QUALITY",
    "Dimension",
    "Extractor",
    "Framework",
    "Judge",
    "Judgment",
    "PairJudgment",
    "PairScores",
    "Percentages",
    "Turn",
    "choose_dimensions",
    "conclude",
    "judge_pair",
    "opposite",
    "parse_argument_list",
    "parse_scores",
    "propose_arguments",
    "run_judge",
    "speak",
    "winner_schema",
]
