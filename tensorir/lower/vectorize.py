"""Vectorize loops (placeholder until the vector pass lands: kept as loops)."""
from __future__ import annotations


def vectorize_loops(stmt):
    return stmt
