"""Rule 5, exclusive states: two facts that each name one member of a class a person is in one of at a time (diet,
relationship status, employment) or two occupations ("is a data scientist" / "is a software engineer")."""

from .analysis import AnalysedFact
from .judgement import Judgement, Relation
from .lexicon import EXCLUSIVE_STATES, OCCUPATIONS_EN, ROLE_EN, ROLE_ZH

STATE_CERTAINTY = 0.8  # "is vegan" after "is vegetarian": the later one holds
# People hold two jobs, or describe one job two ways ("developer" / "software engineer"): a human decides.
ROLE_CERTAINTY = 0.7


def exclusive_state(new: AnalysedFact, old: AnalysedFact, similarity: float) -> Judgement | None:
    if new.negation or old.negation:
        return None
    for name, members in EXCLUSIVE_STATES.items():
        new_state, old_state = _state(new, members), _state(old, members)
        if new_state and old_state and new_state != old_state:
            reason = f"exclusive state, {name}: '{old_state}' -> '{new_state}'"
            return Judgement(Relation.CONTRADICTS, STATE_CERTAINTY, reason)
    new_role, old_role = role(new), role(old)
    if new_role and old_role and not (new_role in old_role or old_role in new_role):
        # "head nurse" after "nurse" is the same job grown: the rest of the facts (the employer) decides
        return Judgement(Relation.CONTRADICTS, ROLE_CERTAINTY, f"another occupation: '{old_role}' -> '{new_role}'")
    return None


def _state(fact: AnalysedFact, members) -> str | None:
    named = [member for member, pattern in members.items() if pattern.search(fact.body)]
    return named[0] if len(named) == 1 else None


def role(fact: AnalysedFact) -> str | None:
    """The occupation a fact gives the user ("a data scientist", "大学老师"), or None."""
    match = ROLE_EN.match(fact.body)
    if match and match["role"].split()[-1].removesuffix("s") in OCCUPATIONS_EN:
        return match["role"]
    match = ROLE_ZH.match(fact.body)
    return match["role"] if match else None
