"""Rule 5, exclusive states: two facts that each name one member of a class a person is in one of at a time (diet,
relationship status, employment) or two occupations ("is a data scientist" / "is a software engineer")."""

import functools

from .analysis import AnalysedFact
from .judgement import Judgement, Relation
from .lexicon import EXCLUSIVE_STATES, OCCUPATIONS_EN, ROLE_EN, ROLE_ZH

STATE_CERTAINTY = 0.8  # "is vegan" after "is vegetarian": the later one holds
# People hold two jobs, or describe one job two ways ("developer" / "software engineer"): a human decides.
ROLE_CERTAINTY = 0.7


def exclusive_state(new: AnalysedFact, old: AnalysedFact, similarity: float) -> Judgement | None:
    if new.negation or old.negation:
        return None
    for name, new_state, old_state in zip(EXCLUSIVE_STATES, _states(new.body), _states(old.body), strict=True):
        if new_state and old_state and new_state != old_state:
            reason = f"exclusive state, {name}: '{old_state}' -> '{new_state}'"
            return Judgement(Relation.CONTRADICTS, STATE_CERTAINTY, reason)
    new_role, old_role = role(new), role(old)
    if new_role and old_role and not (new_role in old_role or old_role in new_role):
        # "head nurse" after "nurse" is the same job grown: the rest of the facts (the employer) decides
        return Judgement(Relation.CONTRADICTS, ROLE_CERTAINTY, f"another occupation: '{old_role}' -> '{new_role}'")
    return None


@functools.lru_cache(maxsize=4096)  # a new fact meets 5 neighbours, and neighbours recur
def _states(body: str) -> tuple[str | None, ...]:
    """The member of each of EXCLUSIVE_STATES the fact names (None: none, or more than one), in their order."""
    return tuple(_state(body, members) for members in EXCLUSIVE_STATES.values())


def _state(body: str, members) -> str | None:
    named = [member for member, pattern in members.items() if pattern.search(body)]
    return named[0] if len(named) == 1 else None


def role(fact: AnalysedFact) -> str | None:
    """The occupation a fact gives the user ("a data scientist", "大学老师"), or None."""
    match = ROLE_EN.match(fact.body)
    if match and match["role"].split()[-1].removesuffix("s") in OCCUPATIONS_EN:
        return match["role"]
    match = ROLE_ZH.match(fact.body)
    return match["role"] if match else None
