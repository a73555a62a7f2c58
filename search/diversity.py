"""Maximal marginal relevance, the search core's last step: near-duplicates do not fill the top of a result."""

import numpy as np


def diversified(scores: list[float], vectors: list[np.ndarray | None], limit: int, mmr_lambda: float) -> list[int]:
    """The places of the `limit` candidates to return, in order, from candidates ranked best first by `scores`: each
    next pick trades relevance (its score over the best) against its highest cosine to what is already picked.
    lambda 1.0 = relevance only. A candidate without a vector (awaiting it) is dissimilar to every pick."""
    if mmr_lambda >= 1.0 or len(scores) <= 1:
        return list(range(min(limit, len(scores))))
    dimensions = next((len(vector) for vector in vectors if vector is not None), 1)
    missing = np.zeros(dimensions, dtype=np.float32)
    stacked = np.stack([missing if vector is None else vector for vector in vectors])
    relevance = np.asarray(scores) / (scores[0] or 1.0)
    redundancy = stacked @ stacked[0]  # each candidate's highest similarity to a pick so far
    picked = np.zeros(len(scores), dtype=bool)
    picked[0] = True
    chosen = [0]
    while len(chosen) < min(limit, len(scores)):
        values = np.where(picked, -np.inf, mmr_lambda * relevance - (1 - mmr_lambda) * redundancy)
        pick = int(np.argmax(values))
        chosen.append(pick)
        picked[pick] = True
        np.maximum(redundancy, stacked @ stacked[pick], out=redundancy)
    return chosen
