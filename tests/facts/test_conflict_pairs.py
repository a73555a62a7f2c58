"""Conflict detection by the offline judge on labelled pairs (tests/facts/conflict_pairs.py): every contradiction
is judged a contradiction, no compatible fact or rewording is. A pair the rules still miss is xfail(strict=True):
the bench (bench/conflicts.py) reports it too, and fixing the rule turns it into a pass.

The similarity is the test settings' hashing embedder's, so no weak rule leans on a sentence model scoring the two
facts alike.
"""

import pytest

from ai.embedders import HashEmbedder
from facts.judging import Relation, judge_by_rules
from tests.facts.conflict_pairs import CONTRADICTION_KINDS, NOT_CONFLICT_KINDS, PAIRS, Pair

_EMBEDDER = HashEmbedder(384)


def _param(pair: Pair, index: int):
    marks = [pytest.mark.xfail(strict=True, reason=pair.xfail)] if pair.xfail else []
    return pytest.param(pair, id=f"{index:03d}-{pair.language}-{pair.kind}", marks=marks)


def _similarity(pair: Pair) -> float:
    new, existing = _EMBEDDER.embed([pair.new, pair.existing])
    return float(new @ existing)


@pytest.mark.parametrize("pair", [_param(pair, index) for index, pair in enumerate(PAIRS)])
def test_pair_is_judged_as_labelled(pair):
    # given a new fact and an existing fact of one user, labelled contradiction or not
    # when the offline judge compares them
    judgement = judge_by_rules(pair.new, pair.existing, similarity=_similarity(pair))

    # then a contradiction is one, and nothing else is
    if pair.contradiction:
        assert judgement.relation == Relation.CONTRADICTS, judgement.reason
    else:
        assert judgement.relation != Relation.CONTRADICTS, judgement.reason


def test_the_table_covers_both_languages_and_kinds():
    counts = {(pair.language, pair.contradiction) for pair in PAIRS}

    assert counts == {("en", True), ("en", False), ("zh", True), ("zh", False)}
    assert len(PAIRS) >= 60
    assert {pair.kind for pair in PAIRS} == {*CONTRADICTION_KINDS, *NOT_CONFLICT_KINDS}
