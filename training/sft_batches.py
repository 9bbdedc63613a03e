"""Packed batches for attention without variable-length kernels (CPU, SDPA, eager).

trl's padding-free collator flattens a batch of packs into one sequence (``1 x B*L`` tokens) with
boundaries that FlashAttention's variable-length kernels honour at the cost of the packs' own
lengths. Elsewhere transformers turns those boundaries into a block-diagonal mask over the whole
flattened sequence, so attention costs ``(B*L)^2`` where each pack needs ``L^2``: a batch of 8
packs of 512 tokens does 8 times the attention work it needs. `PackedRows` keeps each pack a row
of its own (``B x L``) with its position ids restarting at every sample, from which transformers
builds each row's block-diagonal causal mask: no padding inside a pack, no cross-pack attention.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: ``attn_implementation`` values with variable-length kernels, for which flattening is right.
VARLEN = ("flash_attention_2", "flash_attention_3", "kernels-community/flash-attn")


def has_varlen_kernel(attn_implementation: str | None, cuda: bool) -> bool:
    """Whether attention honours a flattened batch's boundaries without a full-size mask."""
    return cuda and attn_implementation is not None and attn_implementation.startswith(VARLEN)


class PackedRows:
    """Collate packed samples as rows of one batch, each row's samples kept apart by position.

    Args:
        flat: trl's padding-free collator; called on one pack at a time, it yields that pack's
            input ids, labels (-100 outside the assistant's turns) and position ids.
        pad_token_id: Fills the rows shorter than the batch's longest.
    """

    def __init__(self, flat: Callable[[list[dict[str, Any]]], dict[str, Any]], pad_token_id: int):
        self.flat = flat
        self.pad_token_id = pad_token_id

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        """One batch: ``input_ids``, ``labels`` and ``position_ids``, one row per pack."""
        import torch

        rows = [self.flat([example]) for example in examples]
        width = max(row["input_ids"].size(1) for row in rows)
        batch: dict[str, list[Any]] = {"input_ids": [], "labels": [], "position_ids": []}
        for row in rows:
            short = width - row["input_ids"].size(1)
            fill = torch.full((1, short), self.pad_token_id, dtype=row["input_ids"].dtype)
            batch["input_ids"].append(torch.cat([row["input_ids"], fill], dim=1))
            batch["labels"].append(torch.cat([row["labels"], torch.full_like(fill, -100)], dim=1))
            # the filler's positions restart at 0: a sequence of its own, seen by no sample
            tail = torch.arange(short, dtype=row["position_ids"].dtype)[None]
            batch["position_ids"].append(torch.cat([row["position_ids"], tail], dim=1))
        return {key: torch.cat(values) for key, values in batch.items()}


def packed_rows_trainer(base: type) -> type:
    """`base` (trl's ``SFTTrainer``), its ``num_tokens`` metric counting `PackedRows` batches.

    trl counts a batch without an attention mask as one flattened row (``position_ids.size(1)``);
    a `PackedRows` batch has several, so the rest are added here, non-filler tokens only (the
    rule transformers' ``num_input_tokens_seen`` counts by).
    """

    class PackedRowsTrainer(base):  # type: ignore[misc, valid-type]
        def compute_loss(self, model: Any, inputs: dict[str, Any], *args: Any, **kw: Any) -> Any:
            result = super().compute_loss(model, inputs, *args, **kw)
            positions = inputs.get("position_ids")
            if model.training and positions is not None and "attention_mask" not in inputs:
                real = (inputs["input_ids"] != self.processing_class.pad_token_id).sum()
                missed = self.accelerator.gather_for_metrics(real - positions.size(1)).sum()
                self._total_train_tokens += int(missed) // self._tp_size
                self._metrics["train"]["num_tokens"] = [self._total_train_tokens]
            return result

    return PackedRowsTrainer
