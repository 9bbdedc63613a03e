"""The Hugging Face Hub: a card for every saved artifact, and pushing it (``--push-to-hub``)."""

from moot.core.lazy import lazy_exports

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "moot.core.hub.cards": (
            "Card",
            "card_licence",
            "command_line",
            "folder_bytes",
            "render_card",
            "size_category",
            "write_card",
        ),
        "moot.core.hub.push": (
            "PushError",
            "check_push",
            "check_repo_id",
            "push_folder",
            "pushed_repo",
        ),
    },
)
