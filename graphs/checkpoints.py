"""A run folder's LangGraph checkpoints: one SQLite file, one way to run or resume a thread.

Each work item of a graph run (a debate, a judgment) is one checkpointer thread named by the
item's stable id, so an interrupted item resumes where it stopped.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, closing
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from moot.core.errors import ModelCallError, writing
from moot.core.llm.models import ModelClient

#: The running settled nodes of the graph run in this context (see `settled`).
_SIBLINGS: ContextVar[set[asyncio.Task] | None] = ContextVar("moot_siblings", default=None)

Node = Callable[..., Awaitable[Any]]


def settled(node: Node) -> Node:
    """A graph node whose failure waits for its siblings of the super-step before it is raised.

    LangGraph cancels every other task of a super-step as soon as one raises, so the other
    branches of a fan-out (`Send`), already paid for, were lost: no reply cached, no write
    checkpointed, and paid again on the rerun. A settled node that fails waits until the other
    settled nodes running in the same `invoke` have finished (their writes committed), then
    raises; the rerun pays only for the failed call.
    """

    @functools.wraps(node)
    async def run(*args: Any, **kwargs: Any) -> Any:
        running, me = _SIBLINGS.get(), asyncio.current_task()
        if running is None or me is None:
            return await node(*args, **kwargs)
        running.add(me)
        try:
            return await node(*args, **kwargs)
        except Exception:
            running.discard(me)  # so two failing siblings do not wait for each other
            if running:
                await asyncio.wait(set(running))
            raise
        finally:
            running.discard(me)

    return run


async def invoke(graph: Any, start: Any, config: dict[str, Any], **options: Any) -> Any:
    """``graph.ainvoke(start, config, **options)`` with its `settled` nodes seeing each other."""
    token = _SIBLINGS.set(set())
    try:
        return await graph.ainvoke(start, config, **options)
    finally:
        _SIBLINGS.reset(token)


@asynccontextmanager
async def open_checkpoints(out_dir: Path) -> AsyncIterator[Any]:
    """The checkpointer of a run folder: a `LoopSqliteSaver` on ``.moot/checkpoints.sqlite``.

    Args:
        out_dir: The run's output folder (created if missing).

    Yields:
        The open checkpointer, for ``build_*_graph(checkpointer)``.

    Raises:
        WriteError: The file failed at the OS (a full disk, ...), while the run used it too.
    """
    from moot.graphs.sqlite_saver import LoopSqliteSaver

    path = Path(out_dir) / ".moot" / "checkpoints.sqlite"
    with writing(path, os_errors=False):  # SQLite's own: the run's other work is not this file's
        with writing(path):
            path.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(path, check_same_thread=False)) as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # 5 ms → 0.4 ms per step
            yield LoopSqliteSaver(conn)


def durability_for(client: ModelClient) -> str:
    """When a thread writes its checkpoints: ``exit`` with the request cache, ``async`` without.

    With the cache on, finished calls survive a crash in the cache, so a thread checkpoints only
    when it stops (done or failed): per-step checkpoints cost ~1.5 ms of CPU per call. Without
    the cache, it checkpoints every step (a debate's round, a judgment's stage) so a resume pays
    again for no call of a finished step.
    """
    return "exit" if client.cache is not None else "async"


async def run_thread(
    graph: Any,
    thread_id: str,
    start: dict[str, Any],
    *,
    context: Any,
    steps: int,
    durability: str,
    done: Callable[[dict[str, Any]], bool],
) -> tuple[dict[str, Any], ModelCallError | None]:
    """Run or resume one thread of `graph` to its end.

    - A finished state in the checkpoint (the item's record was lost in a crash) is used as is,
      without a call.
    - A checkpoint a kill left with nothing to resume is deleted and the thread starts afresh.
    - A checkpoint with a next step resumes from it.
    - Otherwise the thread starts from `start`.

    Args:
        graph: A compiled graph with a checkpointer.
        thread_id: The item's stable id.
        start: The thread's initial state.
        context: The graph's runtime context.
        steps: The recursion limit (supersteps the thread may take).
        durability: From `durability_for`.
        done: Whether a saved state is finished.

    Returns:
        The final state and None; or, when a model call failed for good, the state saved so far
        and the error.
    """
    config = {"configurable": {"thread_id": thread_id}, "recursion_limit": steps}
    try:
        saved = await graph.aget_state(config)
        if saved.values and done(saved.values):
            return saved.values, None
        if saved.values and not saved.next:
            await graph.checkpointer.adelete_thread(thread_id)
        state = await invoke(
            graph, None if saved.next else start, config, context=context, durability=durability
        )
    except ModelCallError as exc:
        return (await graph.aget_state(config)).values, exc
    return state, None
