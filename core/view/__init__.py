"""`moot view`: run folders as one HTML page (data, then the page around it), written or served."""

from moot.core.lazy import lazy_exports

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "moot.core.view.payload": (
            "command_of",
            "read_run",
            "read_runs",
            "run_folders",
            "view_payload",
            "with_labels",
        ),
        "moot.core.view.page": ("embedded_json", "render_view", "write_view"),
        "moot.core.view.live": ("LiveRuns", "follow"),
        "moot.core.view.serve": ("ViewServer", "serve"),
    },
)
