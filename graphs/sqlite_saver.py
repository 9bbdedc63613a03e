"""LangGraph's SQLite checkpointer, its async methods run in the event loop's own thread.

``AsyncSqliteSaver`` sends every statement to aiosqlite's thread and waits for the answer: four
or more round trips between the threads per checkpoint, each waking the event loop. A write to a
local SQLite file in WAL mode with ``synchronous=NORMAL`` takes tens of microseconds, less than
the round trips around it, so `LoopSqliteSaver` makes each async method its sync twin
(``SqliteSaver``'s: same tables, same file). With a checkpoint per step (no request cache), a
debate call costs 0.45 ms of CPU less (1.67 → 1.22 ms at C = 32; issue 33,
`benchmarks/bench_debate_throughput.py`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.base import CheckpointTuple as Saved
from langgraph.checkpoint.sqlite import SqliteSaver


class LoopSqliteSaver(SqliteSaver):
    """A ``SqliteSaver`` whose async methods (LangGraph's ``ainvoke`` uses them) are its sync ones.

    Run in one event loop's thread only, as moot's graph runs are.
    """

    async def aget_tuple(self, config: dict[str, Any]) -> Saved | None:  # noqa: D102
        return self.get_tuple(config)

    async def alist(  # noqa: D102
        self,
        config: dict[str, Any] | None,
        *,
        filter: dict[str, Any] | None = None,  # noqa: A002 (LangGraph's name)
        before: dict[str, Any] | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[Saved]:
        for saved in self.list(config, filter=filter, before=before, limit=limit):
            yield saved

    async def aput(  # noqa: D102
        self,
        config: dict[str, Any],
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> dict[str, Any]:
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(  # noqa: D102
        self,
        config: dict[str, Any],
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self.put_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:  # noqa: D102
        self.delete_thread(thread_id)

    async def aget_delta_channel_history(  # noqa: D102
        self, *, config: dict[str, Any], channels: Sequence[str]
    ) -> Mapping[str, Any]:
        return self.get_delta_channel_history(config=config, channels=channels)

    def forget_threads(self, thread_ids: Sequence[str]) -> None:
        """Delete the checkpoints and writes of `thread_ids`, in one transaction.

        ``delete_thread``'s statements, batched.
        """
        rows = [(str(thread_id),) for thread_id in thread_ids]
        with self.cursor() as cursor:
            cursor.executemany("DELETE FROM checkpoints WHERE thread_id = ?", rows)
            cursor.executemany("DELETE FROM writes WHERE thread_id = ?", rows)
