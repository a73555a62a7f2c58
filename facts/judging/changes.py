"""Rule 3, explicit changes: a fact that says a value changed ("moved to Y", "不再用X，改用Y") against the other."""

from .analysis import AnalysedFact, Change, first_family, show, states, token_family, which_fact
from .attributes import NUMBER
from .judgement import Judgement, Relation
from .lexicon import ATTRIBUTE_KEYS, NAMED_CHANGE_CERTAINTY, UNNAMED_CHANGE_CERTAINTY, UNNAMED_CHANGE_FAMILIES

# "switched to Y" with a marker that names no attribute: the facts must at least share a topic.
BARE_CHANGE_MIN_SIMILARITY = 0.2
# A meeting moved to another hour is likely rescheduled, but it may also happen twice: a human decides.
RESCHEDULE_CERTAINTY = 0.7


def explicit_change(new: AnalysedFact, old: AnalysedFact, similarity: float) -> Judgement | None:
    if new.change is not None:
        judgement = _judge_change(new.change, old, similarity, change_is_new=True) or _rescheduled(new, old, True)
        if judgement is not None:
            return judgement
    if old.change is not None:
        return _judge_change(old.change, new, similarity, change_is_new=False) or _rescheduled(old, new, False)
    return None


def _rescheduled(changed: AnalysedFact, other: AnalysedFact, change_is_new: bool) -> Judgement | None:
    """ "changed the standup to 10am" against "the standup is at 9am": a number or an hour moved, same topic."""
    if changed.change is None:
        return None
    to_numbers = _numbers(changed.change.new)
    other_numbers = _numbers(other)
    if len(to_numbers) != 1 or len(other_numbers) != 1 or to_numbers == other_numbers or other.negation:
        return None
    topic = (changed.content - changed.change.new.content) & (other.content - other_numbers) - ATTRIBUTE_KEYS
    if not topic:
        return None
    summary = f"'{changed.change.marker}' to {show(changed.change.new)}"
    reason = f"change: {summary} in the {which_fact(change_is_new)} fact; the other says {next(iter(other_numbers))}"
    return Judgement(Relation.CONTRADICTS, RESCHEDULE_CERTAINTY, reason)


def _numbers(fact: AnalysedFact) -> frozenset[str]:
    return frozenset(key for key in fact.content if NUMBER.fullmatch(key))


def _judge_change(change: Change, other: AnalysedFact, similarity: float, *, change_is_new: bool) -> Judgement | None:
    """How a fact stating `change` relates to `other`, judged by what `other` says now."""
    where = which_fact(change_is_new)
    to_values = change.new.what
    from_values = change.old.what if change.old else frozenset()
    summary = f"'{change.marker}' " + (f"{show(change.old)} -> " if change.old else "to ") + show(change.new)
    if other.change is not None:
        same_from = change.old is None or other.change.old is None or states(other.change.old, from_values)
        if states(other.change.new, to_values) and same_from:
            return Judgement(Relation.DUPLICATE, 0.9, f"both facts describe the same change: {summary}")
        current = other.change.new  # what the other fact says holds now
    else:
        current = other
    says_from = bool(from_values) and states(current, from_values)
    says_to = states(current, to_values)
    if current.negation:
        if says_to:
            return Judgement(Relation.CONTRADICTS, 0.9, f"change: {summary} in the {where} fact, the other denies it")
        if says_from:
            return Judgement(Relation.UNRELATED, 0.7, f"change: {summary}; the other fact also gave up the old value")
        return None
    if says_from and not says_to:
        return Judgement(
            Relation.CONTRADICTS,
            0.95 if change_is_new else 0.9,
            f"replacement: {summary} in the {where} fact; the other still states {show(change.old)}",
        )
    if says_to and not says_from:
        if change_is_new and change.old is not None:
            return Judgement(Relation.REFINES, 0.8, f"change: {summary} adds what the value was before")
        return Judgement(Relation.DUPLICATE, 0.85, f"change: {summary}; the other fact already states the new value")
    if says_from and says_to:
        return Judgement(Relation.CONTRADICTS, 0.7, f"replacement: {summary}, but the other fact states both values")
    if change.old is not None:
        return None  # the change is about X and the other fact does not mention X
    return _bare_change(change, current, similarity, where, summary)


def _bare_change(change: Change, other: AnalysedFact, similarity: float, where: str, summary: str) -> Judgement | None:
    """ "switched to Y" against a fact that sets the same attribute to something else."""
    family = first_family(other)
    if family is None or other.negation:
        return None
    # the verb of "now uses X" names the attribute; a word further on ("to Austin for the new job") does not
    verb = token_family(change.new.tokens[0])
    named = change.families | ({verb} if verb else set())
    if named and family not in named:
        return None
    if not named and (family not in UNNAMED_CHANGE_FAMILIES or similarity < BARE_CHANGE_MIN_SIMILARITY):
        return None
    if _numbers(change.new) and change.new.content <= _numbers(change.new) | ATTRIBUTE_KEYS:
        return None  # "changed the standup to 10am" moves an hour, not a tool: see _rescheduled
    if not other.values or other.values & change.new.what:
        return None  # no value, or a value partly shared with Y: not clearly another one
    certainty = NAMED_CHANGE_CERTAINTY[family] if named else UNNAMED_CHANGE_CERTAINTY
    how = "the marker names it" if named else f"similarity {similarity:.2f}"
    return Judgement(
        Relation.CONTRADICTS, certainty, f"change: {summary} in the {where} fact; the other sets '{family}' ({how})"
    )
