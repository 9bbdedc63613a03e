"""LangGraph state machines wiring the agents together."""

from moot.graphs.debate import DebateContext, DebateState, build_debate_graph
from moot.graphs.debatrix import JudgeContext, JudgeState, build_judge_graph
from moot.graphs.debatune import DebateRunConfig, RunSummary, Shard, merge_runs, run_debatune
from moot.graphs.judge_run import JudgeRunSummary, JudgeSettings, judge_debates

__all__ = [
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
