"""Test your own pipelines against a scripted OpenAI-compatible server, never a paid model.

`ScriptedServer` is a real HTTP server on 127.0.0.1 that answers ``/v1/chat/completions`` by
`Rule` (the first whose pattern matches a request), fails on purpose by `Fault` (429, 500,
hangs, malformed bodies...), and records every request it saw (`ScriptedServer.requests`).
It also serves OpenAI's Files and Batches API, answering each batch line as a live request
(`ScriptedServer.batch_lines` lists the lines submitted).
Point any model spec at it with ``api_base=server.url`` (``--api-base`` on the command line).

With pytest, enable the ``scripted_server`` fixture in a conftest or test module::

    pytest_plugins = ["moot.testing.pytest_plugin"]

docs/testing.md shows a whole test.
"""

from moot.core.lazy import lazy_exports

# lazily: `python -m moot.testing.server` finds its module not yet imported
__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "moot.testing.server": (
            "BatchLine",
            "Fault",
            "FaultKind",
            "LoggedRequest",
            "Rule",
            "ScriptedServer",
            "ServerConfig",
            "refused_url",
        )
    },
)
