"""The offline judge: the rules in order, the first that decides wins."""

from collections.abc import Callable

from .analysis import AnalysedFact, analyse, join, which_fact, word_stem
from .attributes import align, value_change
from .changes import explicit_change
from .judgement import Judgement, Relation
from .lexicon import ATTRIBUTE_KEYS, COMPARISON_KEYS, HYPERNYMS, ORDER_KEYS
from .states import exclusive_state

_KINDS = {word_stem(word): word_stem(kind) for word, kind in HYPERNYMS.items()}

# A negation past the first words negates a clause ("decided to run again despite not winning"), not the fact.
MAX_WORDS_BEFORE_NEGATION = 2
# A short denial against a fact many times longer shares a word or two by chance, not the statement.
MAX_AFFIRMED_RATIO = 4

# Nearly the same words only make a duplicate when the embeddings agree too.
CLOSE_WORDS_MIN_SIMILARITY = 0.5
CLOSE_WORDS_MIN_SHARE = 0.7


Rule = Callable[[AnalysedFact, AnalysedFact, float], Judgement | None]


def _nothing_to_compare(new: AnalysedFact, old: AnalysedFact, similarity: float) -> Judgement | None:
    if new.tokens and old.tokens:
        return None
    return Judgement(Relation.UNRELATED, 0.5, "nothing to compare: a fact has no words left after normalisation")


def _same_text(new: AnalysedFact, old: AnalysedFact, similarity: float) -> Judgement | None:
    if new.text != old.text:
        return None
    return Judgement(Relation.DUPLICATE, 1.0, "same statement after normalisation")


def _negation(new: AnalysedFact, old: AnalysedFact, similarity: float) -> Judgement | None:
    if bool(new.negation) == bool(old.negation):
        return None
    negated, affirmed = (new, old) if new.negation else (old, new)
    if negated.negation_at > MAX_WORDS_BEFORE_NEGATION:
        return None  # "encourages Jon to keep pushing and not give up" denies nothing the other fact says
    affirmed_content = affirmed.content | {_KINDS[key] for key in affirmed.content if key in _KINDS}
    shared = negated.content & affirmed_content
    if not shared or not (shared - ATTRIBUTE_KEYS or negated.content <= ATTRIBUTE_KEYS):
        return None
    core = negated.core
    if negated.content == affirmed.content:
        certainty = 0.95
    elif len(affirmed.content) > MAX_AFFIRMED_RATIO * len(negated.core or negated.content):
        return None  # "hates losing" against a long story that mentions enjoying something
    elif negated.content <= affirmed_content and len(negated.content) >= 2:
        certainty = 0.9  # "never drinks coffee" denies "drinks coffee every morning"; "has no pets", "has a cat"
    elif core and core <= affirmed_content and core - ATTRIBUTE_KEYS:
        certainty = 0.85  # "stopped running because of a knee injury" denies "runs 10 km every Sunday"
    elif len(shared) / min(len(negated.content), len(affirmed.content)) >= 0.75:
        certainty = 0.6  # "does not use MySQL for analytics" may leave "uses MySQL" true
    else:
        return None
    reason = f"negation: '{negated.negation}' in the {which_fact(negated is new)} fact"
    return Judgement(Relation.CONTRADICTS, certainty, reason)


def _same_words(new: AnalysedFact, old: AnalysedFact, similarity: float) -> Judgement | None:
    if bool(new.negation) != bool(old.negation) or not new.content:
        return None
    if new.keys == old.keys:
        return Judgement(Relation.DUPLICATE, 0.95, "same words once subjects, word forms and synonyms are unified")
    if new.content == old.content and not _order_matters(new, old):
        return Judgement(Relation.DUPLICATE, 0.9, "same words in another order")
    return None


def _reversed_comparison(new: AnalysedFact, old: AnalysedFact, similarity: float) -> Judgement | None:
    if bool(new.negation) != bool(old.negation) or new.content != old.content:
        return None
    if not set(new.keys) & COMPARISON_KEYS or new.keys == old.keys:
        return None
    return Judgement(Relation.CONTRADICTS, 0.8, "the same comparison the other way round")


def _containment(new: AnalysedFact, old: AnalysedFact, similarity: float) -> Judgement | None:
    if bool(new.negation) != bool(old.negation):
        return None
    if old.values and old.content < new.content and _in_order(old, new):
        extra = join(token.text for token in new.tokens if token.key in new.content - old.content)
        return Judgement(Relation.REFINES, 0.85, f"the new fact says the existing one and more: {extra}")
    if new.values and new.content < old.content and _in_order(new, old):
        return Judgement(Relation.DUPLICATE, 0.85, "the new fact says less than the existing one")
    return None


def _order_matters(first: AnalysedFact, second: AnalysedFact) -> bool:
    return bool((set(first.keys) | set(second.keys)) & ORDER_KEYS)


def _in_order(shorter: AnalysedFact, longer: AnalysedFact) -> bool:
    if not _order_matters(shorter, longer):
        return True
    remaining = iter(longer.keys)
    return all(key in remaining for key in shorter.keys)  # a subsequence: "tea over coffee" stays in that order


def _close_words(new: AnalysedFact, old: AnalysedFact, similarity: float) -> Judgement | None:
    if bool(new.negation) != bool(old.negation) or similarity < CLOSE_WORDS_MIN_SIMILARITY:
        return None
    union = new.content | old.content
    share = len(new.content & old.content) / len(union) if union else 0.0
    if share < CLOSE_WORDS_MIN_SHARE:
        return None
    slot = align(new, old)
    if slot is not None and len(slot.new_value) == 1 and len(slot.old_value) == 1:
        return None  # one word swapped for another is a changed value, not a rewording
    return Judgement(Relation.DUPLICATE, 0.7, f"nearly the same words ({share:.0%} shared)")


_RULES: tuple[Rule, ...] = (
    _nothing_to_compare,
    _same_text,
    explicit_change,
    _negation,
    exclusive_state,
    _same_words,
    _reversed_comparison,
    _containment,
    value_change,
    _close_words,
)


def judge_by_rules(new: str, existing: str, *, similarity: float) -> Judgement:
    """How `new` relates to `existing`, both facts of one user; `similarity` is their embeddings' cosine."""
    new_fact, existing_fact = analyse(new), analyse(existing)
    for rule in _RULES:
        judgement = rule(new_fact, existing_fact, similarity)
        if judgement is not None:
            return judgement
    return Judgement(Relation.UNRELATED, 0.6, "no shared statement: compatible or about different things")
