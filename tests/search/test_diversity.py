"""search.diversity: maximal marginal relevance over ranked candidates (facts_search's last step; the API's effect is
tested in tests/facts/test_search.py)."""

import numpy as np

from search.diversity import diversified


def unit(*values: float) -> np.ndarray:
    vector = np.asarray(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def test_a_near_duplicate_of_the_best_waits_behind_a_different_candidate():
    vectors = [unit(1, 0, 0), unit(1, 0.01, 0), unit(0, 1, 0)]

    assert diversified([1.0, 0.95, 0.8], vectors, limit=2, mmr_lambda=0.5) == [0, 2]
    assert diversified([1.0, 0.95, 0.8], vectors, limit=3, mmr_lambda=0.5) == [0, 2, 1]


def test_lambda_one_keeps_the_ranking_and_the_limit():
    vectors = [unit(1, 0, 0), unit(1, 0.01, 0), unit(0, 1, 0)]

    assert diversified([1.0, 0.95, 0.8], vectors, limit=2, mmr_lambda=1.0) == [0, 1]
    assert diversified([1.0], vectors[:1], limit=5, mmr_lambda=0.5) == [0]
    assert diversified([], [], limit=5, mmr_lambda=0.5) == []


def test_a_candidate_awaiting_its_vector_is_like_no_pick():
    vectors = [unit(1, 0, 0), unit(1, 0.01, 0), None]

    assert diversified([1.0, 0.95, 0.6], vectors, limit=2, mmr_lambda=0.5) == [0, 2]
    assert diversified([1.0, 0.95, 0.6], [None, None, None], limit=3, mmr_lambda=0.5) == [0, 1, 2]
