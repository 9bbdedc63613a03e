"""A judge as data, asked: one juror's judgment of one item (`moot.agents.judge_spec`).

Each call goes through `ModelClient.complete_structured` with the spec's output schema: the
tolerant parser, one paid repair round, then an explicit parse failure (never a default). A
``both_orders`` judge asks twice, the pair's texts swapped, and reads A's win, tie or loss and
whether it changed with the order as DEBATunE's pairwise judge does (`PairJudgment`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from moot.agents.debatune_judges import Judgment, PairJudgment
from moot.agents.judge_spec import JudgeFile
from moot.core.llm.models import ModelClient
from moot.core.llm.spec import Role
from moot.core.runs import gather_all


async def ask(
    client: ModelClient,
    role: Role,
    judge: JudgeFile,
    item: Mapping[str, Any],
    *,
    seed: int = 0,
    constrained: bool = False,
) -> Judgment | PairJudgment:
    """`role`'s judgment of `item`: one `Judgment`, or a `PairJudgment` under ``both_orders``.

    Args:
        client: The model layer.
        role: The juror.
        judge: The checked judge.
        item: The input record (it holds every field the judge names: `check_item`).
        seed: Sampling seed.
        constrained: Send the schema as ``response_format``.
    """
    spec = judge.spec
    if spec.aggregation.method != "both_orders":
        return await _judgment(client, role, judge, item, False, seed, constrained)
    forward, reverse = await gather_all(
        *(_judgment(client, role, judge, item, swap, seed, constrained) for swap in (False, True))
    )
    a, b = spec.verdict_fields()
    return PairJudgment(forward, reverse, (a, b))


def verdict(judged: Judgment | PairJudgment, judge: JudgeFile) -> Any:
    """A juror's verdict: its verdict field's value, or A's outcome; None when unread."""
    if isinstance(judged, PairJudgment):
        return judged.outcome
    if judged.value is None:
        return None
    return judged.value.model_dump()[judge.spec.verdict_fields()[0]]


async def _judgment(
    client: ModelClient,
    role: Role,
    judge: JudgeFile,
    item: Mapping[str, Any],
    swapped: bool,
    seed: int,
    constrained: bool,
) -> Judgment:
    spec = judge.spec
    result = await client.complete_structured(
        role,
        judge.messages(item, swapped),
        judge.schema,
        stage=spec.name,
        max_tokens=spec.max_tokens,
        seed=seed,
        constrained=constrained and spec.reply != "number",  # the paper's bare number, not JSON
        parse=judge.read,
    )
    return Judgment(result.value, result.failure, tuple(c.text for c in result.completions))
