"""LangGraph state machines wiring the agents together."""

from moot.graphs.answer import AnswerContext, answer_questions, build_answer_graph
from moot.graphs.curate import CurateContext, build_curate_graph, curate
from moot.graphs.debate import DebateContext, DebateState, build_debate_graph
from moot.graphs.debatrix import JudgeContext, JudgeState, build_judge_graph
from moot.graphs.debatune import DebateRunConfig, RunSummary, Shard, merge_runs, run_debatune
from moot.graphs.judge_run import JudgeRunSummary, JudgeSettings, judge_debates
from moot.graphs.qa_eval import evaluate_berds, evaluate_detector, evaluate_dispute_awareness

__all__ = [
    "AnswerContext",
    "CurateContext",
    "answer_questions",
    "build_answer_graph",
    "build_curate_graph",
    "curate",
    "evaluate_berds",
    "evaluate_detector",
    "evaluate_dispute_awareness",
    "DebateContext",
    "DebateRunConfig",
    "DebateState",
    "JudgeContext",
    "JudgeRunSummary",
    "JudgeSettings",
    "JudgeState",
    "RunSummary",
    "Shard",
    "build_debate_graph",
    "build_judge_graph",
    "judge_debates",
    "merge_runs",
    "run_debatune",
]
