"""Rule 8, another value of one attribute: two facts aligned on their common start and end, and the kind of
attribute the frame around the differing value names ("lives in", "name is", "prefers", "住在")."""

import re
from collections.abc import Callable
from dataclasses import dataclass

from .analysis import AnalysedFact, Token, quote
from .judgement import Judgement, Relation
from .lexicon import ALSO, ATTRIBUTE_KEYS, CJK_CHAR, DATE, FRAME_KEYS, NOW, PREFER_STEMS

# A number, an hour ("11pm", "7:30"), a price: a value one question has one answer to.
NUMBER = re.compile(r"[$€£¥]?\d+(?:[.:,]\d+)?(?:am|pm|h|k|%)?")
_CLOCK = re.compile(r"\d+(?::\d+)?(?:am|pm)|\d+:\d+")

# A weakly exclusive attribute ("prefers X") may hold several values: only facts that read alike count as a clash.
WEAK_ATTRIBUTE_MIN_SIMILARITY = 0.5


@dataclass(frozen=True)
class Slot:
    """Two facts aligned on their common start and end: the frame around the value where they differ."""

    prefix: tuple[str, ...]
    suffix: tuple[str, ...]
    new_value: tuple[Token, ...]
    old_value: tuple[Token, ...]
    new_last: Token | None  # last token of the prefix in each fact: same key, perhaps another word
    old_last: Token | None
    prefers: bool = False  # both prefixes say "prefers" (not just "likes"): "更喜欢用Vim", "prefers using Vim"

    def prefix_ends(self, *keys: str) -> bool:
        return self.prefix[-len(keys) :] == keys

    def suffix_starts(self, *keys: str) -> bool:
        return self.suffix[: len(keys)] == keys

    @property
    def numeric(self) -> bool:
        values = (self.new_value, self.old_value)
        return all(len(value) == 1 and NUMBER.fullmatch(value[0].key) for value in values)

    @property
    def clock(self) -> bool:
        return self.numeric and any(_CLOCK.fullmatch(value[0].key) for value in (self.new_value, self.old_value))

    @property
    def single_words(self) -> bool:
        return len(self.new_value) == 1 and len(self.old_value) == 1

    @property
    def dated(self) -> bool:
        values = (self.new_value, self.old_value)
        return all(len(value) == 1 and DATE.fullmatch(value[0].key) for value in values)

    @property
    def prefers_on_both_sides(self) -> bool:
        return self.prefers

    @property
    def attribute_before_copula(self) -> bool:
        return any(key not in FRAME_KEYS and key not in ATTRIBUTE_KEYS for key in self.prefix[:-1])

    @property
    def comparable_values(self) -> bool:
        """Whether the two values look like answers to one question: "MySQL"/"PostgreSQL", not "tea"/"dark mode"."""
        return bool(self.suffix) or _value_shape(self.new_value) == _value_shape(self.old_value)

    @property
    def qualified(self) -> bool:
        return bool(self.suffix) and (self.suffix[0] in {"for", "as", "to"} or bool(CJK_CHAR.match(self.suffix[0])))


def _value_shape(value: tuple[Token, ...]) -> tuple[bool, int]:
    """Script and rough length of a value: words for English; for Chinese 1-2 characters (a word) or more."""
    chinese = all(CJK_CHAR.match(token.text) for token in value)
    return chinese, (min(len(value), 3) // 3 if chinese else len(value))


# A value is a few words; past that the two facts differ in what they say, not in one value of it.
MAX_VALUE_WORDS = 6

# "Drives a Toyota now" after "drives a BMW": "now" says the value changed, but not which attribute: a human decides.
NOW_CERTAINTY = 0.65


def _says_now(new: AnalysedFact, old: AnalysedFact, slot: Slot) -> bool:
    """One fact says "now" (and not "now also") about another short value after the same verb."""
    now = any(NOW.search(fact.body) and not ALSO.search(fact.body) for fact in (new, old))
    verb = any(key not in FRAME_KEYS and key not in ATTRIBUTE_KEYS for key in slot.prefix)  # "drives", not "likes"
    short = len(slot.new_value) <= 2 and len(slot.old_value) <= 2
    return bool(now) and verb and short and slot.comparable_values


@dataclass(frozen=True)
class _Attribute:
    name: str
    certainty: float
    matches: Callable[[Slot], bool]
    weak: bool = False  # may hold several values: needs similar facts, and a human settles it


def _is_name(slot: Slot) -> bool:
    return slot.prefix_ends("name", "be") or slot.prefix_ends("name")  # "name is X", "is called X", "叫X"


def _is_age(slot: Slot) -> bool:
    # "is 30 years old", "age is 30", "30岁", and a bare "is 30" of a fact about the user
    return slot.numeric and (slot.suffix_starts("age") or slot.prefix_ends("age", "be") or slot.prefix == ("be",))


def _is_birth(slot: Slot) -> bool:
    return slot.prefix_ends("born", "in") or slot.prefix_ends("born", "on")


def _is_home(slot: Slot) -> bool:
    return slot.prefix_ends("live", "in")  # "lives in", "is based in", "住在"


def _is_employer(slot: Slot) -> bool:
    at_work = any(slot.prefix_ends("work", preposition) for preposition in ("at", "for", "in", "as"))
    in_both = all(any(token.key == "in" for token in value) for value in (slot.new_value, slot.old_value))
    # "在X工作", and "换了新工作，在X上班" against "在Y工作"
    return at_work or ((slot.prefix_ends("in") or in_both) and slot.suffix_starts("work"))


def _is_school(slot: Slot) -> bool:
    return slot.prefix_ends("studi", "at") or slot.prefix_ends("studi", "in")


def _is_means(slot: Slot) -> bool:
    # "commutes by bike" / "by car"; "开车上班" / "骑自行车上班": one way to get somewhere at a time
    by = slot.prefix_ends("by") and slot.single_words and len(slot.prefix) >= 2
    short = len(slot.new_value) <= 4 and len(slot.old_value) <= 4
    chinese = all(CJK_CHAR.match(token.text) for token in (*slot.new_value, *slot.old_value))
    # "takes the train to work", "开车上班"; not "writes Python at work"
    to_work = slot.suffix[-2:] == ("to", "work") or (slot.suffix[-1:] == ("work",) and chinese)
    return by or (not slot.prefix and to_work and short)


def _is_origin(slot: Slot) -> bool:
    return slot.prefix_ends("be", "from") or slot.prefix_ends("come", "from") or slot.prefix == ("from",)


def _is_favourite(slot: Slot) -> bool:
    # "favourite colour is X"; "最喜欢X" too, but not "favourite book is X" against "favourite film is Y"
    copula_in_value = any(token.key == "be" for token in (*slot.new_value, *slot.old_value))
    return ("favorite" in slot.prefix and slot.prefix_ends("be")) or (
        slot.prefix_ends("favorite") and not copula_in_value
    )


def _is_count(slot: Slot) -> bool:
    return slot.numeric and bool(slot.suffix)  # "has 2 kids" / "has 3 kids"


def _is_copula(slot: Slot) -> bool:
    return slot.prefix_ends("be") and slot.attribute_before_copula  # "timezone is CET"


def _is_preference(slot: Slot) -> bool:
    liking = slot.prefix_ends("like") or slot.prefix_ends("like", "use")
    return liking and slot.prefers_on_both_sides and slot.comparable_values


def _is_tool_for(slot: Slot) -> bool:
    return slot.prefix_ends("use") and slot.qualified  # "uses Vim as editor", "用Jira管理任务"


# First match wins: the specific before the general.
_ATTRIBUTES: tuple[_Attribute, ...] = (
    _Attribute("name", 0.9, _is_name),
    _Attribute("age", 0.9, _is_age),
    _Attribute("born", 0.9, _is_birth),
    _Attribute("lives in", 0.85, _is_home),
    _Attribute("works at", 0.85, _is_employer),
    _Attribute("studies at", 0.8, _is_school),
    _Attribute("comes from", 0.85, _is_origin),
    _Attribute("favourite", 0.85, _is_favourite),
    _Attribute("a count", 0.8, _is_count),
    _Attribute("time", 0.8, lambda slot: slot.clock),
    _Attribute("how", 0.7, _is_means),
    # An event moved to another day is likely rescheduled, but the same thing may happen twice: a human decides.
    _Attribute("date", 0.7, lambda slot: slot.dated),
    _Attribute("<attribute> is", 0.8, _is_copula),
    _Attribute("prefers", 0.6, _is_preference, weak=True),
    _Attribute("uses … for", 0.6, _is_tool_for, weak=True),
)


def align(new: AnalysedFact, old: AnalysedFact) -> Slot | None:
    new_keys, old_keys = new.keys, old.keys
    shortest = min(len(new_keys), len(old_keys))
    start = 0
    while start < shortest and new_keys[start] == old_keys[start]:
        start += 1
    end = 0
    while end < shortest - start and new_keys[-1 - end] == old_keys[-1 - end]:
        end += 1
    new_value = new.tokens[start : len(new_keys) - end]
    old_value = old.tokens[start : len(old_keys) - end]
    if not new_value or not old_value or start + end == 0:
        return None
    return Slot(
        prefix=new_keys[:start],
        suffix=new_keys[len(new_keys) - end :],
        new_value=new_value,
        old_value=old_value,
        new_last=new.tokens[start - 1] if start else None,
        old_last=old.tokens[start - 1] if start else None,
        prefers=all(any(token.stem in PREFER_STEMS for token in fact.tokens[:start]) for fact in (new, old)),
    )


def _after_in(value: tuple[Token, ...]) -> tuple[Token, ...]:
    """The value after its last "in" ("换了新工作，在京东" -> "京东"), or the value when it has none or ends there."""
    last = max((index for index, token in enumerate(value) if token.key == "in"), default=-1)
    return value[last + 1 :] or value


def value_change(new: AnalysedFact, old: AnalysedFact, similarity: float) -> Judgement | None:
    if bool(new.negation) != bool(old.negation):
        return None
    slot = align(new, old)
    if slot is None or max(len(slot.new_value), len(slot.old_value)) > MAX_VALUE_WORDS:
        return None
    attribute = next((attribute for attribute in _ATTRIBUTES if attribute.matches(slot)), None)
    old_value, new_value = quote(old, _after_in(slot.old_value)), quote(new, _after_in(slot.new_value))
    if attribute is None and _says_now(new, old, slot):
        reason = f"changed value, the fact says now: '{old_value}' -> '{new_value}'"
        return Judgement(Relation.CONTRADICTS, NOW_CERTAINTY, reason)
    if attribute is None:
        if slot.prefix_ends("like") or slot.prefix_ends("use"):
            return Judgement(Relation.UNRELATED, 0.7, f"compatible: '{old_value}' and '{new_value}' can both hold")
        return None
    change = f"'{old_value}' -> '{new_value}'"
    if attribute.weak and similarity < WEAK_ATTRIBUTE_MIN_SIMILARITY:
        return Judgement(
            Relation.UNRELATED,
            0.5,
            f"'{attribute.name}' {change}, but the facts read too differently (similarity {similarity:.2f})",
        )
    return Judgement(Relation.CONTRADICTS, attribute.certainty, f"changed value of '{attribute.name}': {change}")
