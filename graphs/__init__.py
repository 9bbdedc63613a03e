"""LangGraph state machines wiring the agents together."""

from moot.graphs.debate import DebateContext, DebateState, build_debate_graph
from moot.graphs.debatune import DebateRunConfig, RunSummary, Shard, merge_runs, run_debatune

__all__ = [
    "DebateContext",
    "DebateRunConfig",
    "DebateState",
    "RunSummary",
    "Shard",
    "build_debate_graph",
    "merge_runs",
    "run_debatune",
]
