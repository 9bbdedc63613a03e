"""Metrics: statistics, agreement, and each paper's scores (DEBATunE, PanelBench, P.D., ...)."""
