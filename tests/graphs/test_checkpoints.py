"""Running or resuming one checkpointed thread: DEBATunE's protocol and the scripted server."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from moot.core import ModelClient, RetryPolicy, Role, parse_spec
from moot.core.llm.cache import RequestCache
from moot.graphs.checkpoints import durability_for, open_checkpoints, run_thread
from moot.graphs.debatune_debate import debaters, debatune_protocol
from moot.graphs.protocol_debate import (
    ProtocolContext,
    build_protocol_graph,
    recursion_limit,
    start,
)
from moot.testing import Fault, ScriptedServer

ID = "d1"
INPUTS = {"topic": "Zoos", "stance": "Affirmative", "argument": "Zoos protect species."}


def context(url: str, rounds: int = 1) -> ProtocolContext:
    spec = parse_spec("openai/scripted", api_base=url)
    client = ModelClient(retry=RetryPolicy(attempts=1))  # no cache: every step checkpointed
    roles = debaters(Role("debater_a", spec, 0.7), Role("debater_b", spec, 1.0))
    return ProtocolContext(debatune_protocol(rounds, 800, 2048), roles, client)


def conclusion(state: dict[str, Any]) -> str | None:
    return state.get("final", {}).get("text")


async def debate(folder: Path, ctx: ProtocolContext, before: dict[str, Any] | None = None) -> tuple:
    """Run the debate thread; `before` is first saved as a state with nothing left to run."""
    async with open_checkpoints(folder) as saver:
        graph = build_protocol_graph(saver)
        if before is not None:
            config = {"configurable": {"thread_id": ID}}
            await graph.aupdate_state(config, before, as_node="final")
            assert not (await graph.aget_state(config)).next
        return await run_thread(
            graph,
            ID,
            start(ctx.protocol, ID, INPUTS),
            context=ctx,
            steps=recursion_limit(ctx.protocol),
            durability=durability_for(ctx.client),
            done=lambda state: bool(conclusion(state)),
        )


def test_a_finished_thread_is_used_again_without_a_call(tmp_path):
    with ScriptedServer() as server:
        ctx = context(server.url)
        state, error = asyncio.run(debate(tmp_path, ctx))
        calls = len(server.requests)
        again, error_again = asyncio.run(debate(tmp_path, ctx))
        assert len(server.requests) == calls == 3  # two turns and the conclusion, once
    assert error is None and error_again is None
    assert again == state and conclusion(state) and len(state["turns"]) == 2
    assert (tmp_path / ".moot" / "checkpoints.sqlite").exists()


def test_a_failed_call_returns_the_state_so_far_and_a_rerun_resumes_after_it(tmp_path):
    with ScriptedServer() as server:
        server.add_fault(Fault("500", times=1, match="watching a debate"))
        ctx = context(server.url)
        state, error = asyncio.run(debate(tmp_path, ctx))
        assert error is not None and "HTTP 500" in str(error)
        assert len(state["turns"]) == 2 and not conclusion(state)
        server.clear_log()
        state, error = asyncio.run(debate(tmp_path, ctx))
        asked = [r.body["messages"][0]["content"] for r in server.requests]
    assert error is None and conclusion(state)
    assert len(asked) == 1 and "watching a debate" in asked[0]  # only the conclusion again


def test_checkpoints_an_earlier_version_wrote_through_aiosqlite_resume(tmp_path):
    # moot up to 20bc520 saved with LangGraph's AsyncSqliteSaver: the same tables, so a run
    # interrupted then resumes under `LoopSqliteSaver` without paying for its finished turns
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async def earlier_version(ctx: ProtocolContext) -> tuple:
        (tmp_path / ".moot").mkdir()
        path = str(tmp_path / ".moot" / "checkpoints.sqlite")
        async with AsyncSqliteSaver.from_conn_string(path) as saver:
            return await run_thread(
                build_protocol_graph(saver),
                ID,
                start(ctx.protocol, ID, INPUTS),
                context=ctx,
                steps=recursion_limit(ctx.protocol),
                durability="async",
                done=lambda state: bool(conclusion(state)),
            )

    with ScriptedServer() as server:
        server.add_fault(Fault("500", times=1, match="watching a debate"))
        ctx = context(server.url)
        state, error = asyncio.run(earlier_version(ctx))
        assert error is not None and len(state["turns"]) == 2
        server.clear_log()
        state, error = asyncio.run(debate(tmp_path, ctx))
        assert error is None and conclusion(state) and len(server.requests) == 1


def test_a_failure_in_b_s_turn_keeps_the_finished_rounds_and_the_rerun_asks_that_round_again(
    tmp_path,
):
    # a round is one checkpointed step: without the cache, A's turn of the failed round is paid
    # again, never an earlier round (docs/architecture.md, "Durability")
    b_second_turn = "(?s)proposed by your opponent.*Please first answer"
    with ScriptedServer() as server:
        server.add_fault(Fault("500", times=1, match=b_second_turn))
        ctx = context(server.url, rounds=2)
        state, error = asyncio.run(debate(tmp_path, ctx))
        assert error is not None and len(server.requests) == 4
        assert [turn["agent"] for turn in state["turns"]] == ["A", "B"]
        server.clear_log()
        state, error = asyncio.run(debate(tmp_path, ctx))
        asked = [r.body["messages"][1]["content"] for r in server.requests]
    assert error is None and conclusion(state) and len(state["turns"]) == 4
    assert len(asked) == 3 and "proposed by you" in asked[0] and "debate" in asked[2]
    assert "Please first answer" in asked[0] and "Please first answer" in asked[1]


def test_a_checkpoint_with_nothing_to_resume_is_dropped_and_the_thread_starts_afresh(tmp_path):
    turn = {"agent": "A", "round": 0, "text": "LEFT BY A KILL"}
    left = {"id": ID, "inputs": INPUTS, "turns": [turn]}  # no conclusion, no next step
    with ScriptedServer() as server:
        state, error = asyncio.run(debate(tmp_path, context(server.url), before=left))
        assert len(server.requests) == 3
    assert error is None and conclusion(state)
    assert len(state["turns"]) == 2 and "LEFT BY A KILL" not in str(state["turns"])


class OldDebateState(TypedDict, total=False):
    """DEBATunE's debate state before its debate was a protocol."""

    id: str
    topic: str
    stance: str
    argument: str
    turns: list[dict[str, Any]]
    conclusion: str


@pytest.mark.parametrize("node", ["round", "debater_b"])
def test_a_checkpoint_of_another_graph_version_is_dropped_and_the_thread_starts_afresh(
    tmp_path, node
):
    # saved by DEBATunE's own graph, of a node per round (before its debate was a protocol) or
    # per turn (before issue 19): its next step is a node this graph lacks, so `aget_state`
    # finds nothing to resume, and the old state is never read
    turn = {"speaker": "A", "side": "Affirmative", "round": 0, "text": "OLD GRAPH"}

    async def older_graph_left_a_step(folder: Path) -> None:
        async with open_checkpoints(folder) as saver:
            graph = StateGraph(OldDebateState)
            graph.add_node("debater_a", lambda state: {"turns": [turn]})
            graph.add_node(node, lambda state: {})
            graph.add_edge(START, "debater_a")
            graph.add_edge("debater_a", node)
            graph.add_edge(node, END)
            old = graph.compile(checkpointer=saver, interrupt_before=[node])
            job = {"id": ID, **INPUTS, "turns": []}
            await old.ainvoke(job, {"configurable": {"thread_id": ID}})

    asyncio.run(older_graph_left_a_step(tmp_path))
    with ScriptedServer() as server:
        state, error = asyncio.run(debate(tmp_path, context(server.url)))
        assert len(server.requests) == 3
    assert error is None and conclusion(state)
    assert len(state["turns"]) == 2 and "OLD GRAPH" not in str(state["turns"])


def test_checkpoints_wait_for_the_end_only_when_the_cache_keeps_the_calls(tmp_path):
    assert durability_for(ModelClient()) == "async"
    assert durability_for(ModelClient(cache=RequestCache(tmp_path / "c.sqlite"))) == "exit"
