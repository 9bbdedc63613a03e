"""Retrieval for DebateQA and BERDS: local indexes (BM25, dense, hybrid, MMR), web search."""
