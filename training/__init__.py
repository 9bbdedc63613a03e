"""Training data builders (and, later, LoRA SFT)."""

from moot.training.debate_data import instruction, sft_record, write_sft_dataset

__all__ = ["instruction", "sft_record", "write_sft_dataset"]
