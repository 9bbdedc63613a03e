"""The ``moot`` command line: one module per paper's commands over shared options and runtime."""

from moot.cli.main import main

__all__ = ["main"]
