"""The model layer: specs, the one call path, cache, ledger, structured output, local models."""

# the built-in transports register themselves: every spec, however imported, finds its own
from moot.core.llm import transports  # noqa: F401
