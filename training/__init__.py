"""Training: SFT data builders, SFT and DPO (full or LoRA, trl + peft), merging and launches.

Public names are imported from their modules on first use (`moot.core.lazy`).
"""

from moot.core.lazy import lazy_exports

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "moot.training.chat_templates": (
            "FAMILIES",
            "ChatFamily",
            "chat_family",
        ),
        "moot.training.compqa_data": ("distill_compqa",),
        "moot.training.sft_data": ("load_sft_dataset", "read_sft_rows"),
        "moot.training.debatune_data": (
            "instruction",
            "sft_record",
            "sft_records",
            "write_sft_dataset",
        ),
        "moot.training.dpo_config": ("DPORunConfig", "load_dpo_config"),
        "moot.training.dpo_data": ("load_preference_dataset", "read_preference_rows"),
        "moot.training.dpo_trainer": ("build_dpo_trainer", "check_dpo_inputs", "train_dpo"),
        "moot.training.merge": ("merge_adapter",),
        "moot.training.sft_batches": ("PackedRows", "has_varlen_kernel", "packed_rows_trainer"),
        "moot.training.mixing": ("mix_datasets",),
        "moot.training.sft_trainer": (
            "PreparedRun",
            "SFTResult",
            "build_trainer",
            "exit_worker",
            "train_sft",
        ),
        "moot.training.sft_config": (
            "SFTRunConfig",
            "load_sft_config",
        ),
    },
)
