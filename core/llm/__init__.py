"""The model layer: specs, the one call path, cache, ledger, structured output, local models."""
