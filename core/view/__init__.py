"""`moot view`: run folders as one self-contained HTML page (data, then the page around it)."""

from moot.core.lazy import lazy_exports

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "moot.core.view.payload": (
            "command_of",
            "read_run",
            "read_runs",
            "view_payload",
        ),
        "moot.core.view.page": ("embedded_json", "render_view", "write_view"),
    },
)
