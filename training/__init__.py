"""Training: SFT data builders, LoRA SFT (trl + peft), adapter merging and launches."""

from moot.training.chat_templates import FAMILIES, ChatFamily, chat_family
from moot.training.compqa_data import distill_compqa
from moot.training.data import load_sft_dataset
from moot.training.debate_data import instruction, sft_record, write_sft_dataset
from moot.training.merge import merge_adapter
from moot.training.mixing import mix_datasets
from moot.training.sft import PreparedRun, SFTResult, build_trainer, train_sft
from moot.training.sft_config import SFTRunConfig, load_sft_config

__all__ = [
    "FAMILIES",
    "ChatFamily",
    "PreparedRun",
    "SFTResult",
    "SFTRunConfig",
    "build_trainer",
    "chat_family",
    "distill_compqa",
    "instruction",
    "load_sft_config",
    "load_sft_dataset",
    "merge_adapter",
    "mix_datasets",
    "sft_record",
    "train_sft",
    "write_sft_dataset",
]
