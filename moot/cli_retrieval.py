"""`moot index` and `moot retrieve`: corpora, BM25/dense/hybrid retrieval, MMR, query expansion."""

from __future__ import annotations

import argparse
from typing import Any


def register(commands: Any, evaluations: Any) -> None:
    """Add this module's commands to ``moot`` (`commands`) and ``moot eval`` (`evaluations`)."""
    del commands, evaluations  # filled in by the DebateQA/BERDS work (issue 6)


__all__ = ["argparse", "register"]
