"""A fact is written without its subject ("Lives in Valencia"): a content that still opens with "I", "The user",
"我" or "用户" is rewritten to that form, the verb put in the third person where English needs it."""

import re

from .patterns import third_person

# "I <contraction>" and "I <auxiliary>": what each becomes without its subject (a contraction stays one).
_ENGLISH_AUXILIARIES = {
    "am not": "Is not",
    "am": "Is",
    "'m not": "Is not",
    "'m": "Is",
    "was": "Was",
    "wasn't": "Wasn't",
    "have not": "Has not",
    "haven't": "Hasn't",
    "have": "Has",
    "'ve": "Has",
    "had": "Had",
    "hadn't": "Hadn't",
    "do not": "Does not",
    "don't": "Doesn't",
    "did not": "Did not",
    "didn't": "Didn't",
    "cannot": "Cannot",
    "can't": "Can't",
    "won't": "Won't",
    "'ll": "Will",
    "'d been": "Had been",
    "'d": "Would",
}
# Past forms and modals stay as they are ("I moved to Lisbon" -> "Moved to Lisbon", "I can swim" -> "Can swim").
_UNCHANGED = frozenset(
    """can could will would shall should may might must used ought went got bought made took left came began grew
    met saw said told found felt thought knew became gave ran wrote sold built spent lost won kept brought taught
    quit broke fell flew drove ate drank chose sent paid heard held stood understood sat slept wore swam sang rode
    forgot caught fought sought did gave threw woke spoke put""".split()
)
# Words that may stand between the subject and its verb ("I really like tea" -> "Really likes tea").
_ADVERBS = frozenset(
    """always never usually often sometimes rarely seldom really also still just only mostly generally normally
    typically recently currently actually definitely absolutely strongly truly mainly even already now no longer
    personally first then later once soon eventually probably kinda sorta especially finally""".split()
)

_I = re.compile(r"^i(?=['\s])", re.IGNORECASE)
# "The user lives in..." but not "User interface in dark mode": the word after it (past any adverbs) reads as a verb.
_VERB_AFTER_USER = r"(?:\w+(?:s|ed)|\w+n't|was|can|cannot|could|will|would|should|may|might|must|had|did)\b"
_THE_USER = re.compile(
    rf"^(?:the\s+)?user(?:\s*:)?\s+(?=(?:(?:{'|'.join(sorted(_ADVERBS))})\s+)*{_VERB_AFTER_USER})", re.IGNORECASE
)
# 我 alone, not 我们 (we), 我的 (my), 我国 (our country)...: a fact of the user, not of a group or a possession.
_CHINESE = re.compile(r"^(?:我(?![们的国方司校]|自己的)|(?:该|这位|这个)?用户(?![们的名群数量]))\s*")


def subjectless(content: str) -> str:
    """The content without a leading "I", "The user"/"User", "我" or "用户" subject; any other content as it is.
    "I live in Valencia" -> "Lives in Valencia", "The user is allergic to shellfish" -> "Is allergic to shellfish",
    "我不再喜欢爬山" -> "不再喜欢爬山", "用户住在成都" -> "住在成都"."""
    text = content.strip().replace("’", "'")
    if _I.match(text):
        rest = _english_third_person(text[1:])
    elif match := _THE_USER.match(text):
        rest = text[match.end() :]
    elif match := _CHINESE.match(text):
        rest = text[match.end() :]
    else:
        return content.strip()
    return _capitalised(rest.strip()) if rest.strip() else content.strip()


def _english_third_person(rest: str) -> str:
    """What follows "I", with its verb agreeing with an unnamed third person."""
    lowered = rest.lower()
    for auxiliary in sorted(_ENGLISH_AUXILIARIES, key=len, reverse=True):  # "am not" before "am"
        spaced = auxiliary if auxiliary.startswith("'") else f" {auxiliary}"
        if lowered.startswith(spaced) and (len(rest) == len(spaced) or not rest[len(spaced)].isalpha()):
            return f"{_ENGLISH_AUXILIARIES[auxiliary]}{rest[len(spaced) :]}"
    words = rest.split()
    adverbs = 0
    while adverbs < len(words) - 1 and words[adverbs].lower() in _ADVERBS:
        adverbs += 1
    if adverbs < len(words):
        words[adverbs] = _third_person(words[adverbs])
    return " ".join(words)


def _third_person(verb: str) -> str:
    head, dash, lowered = verb.lower().rpartition("-")  # "color-code" -> "color-codes": the last part agrees
    if not lowered.isalpha() or lowered in _UNCHANGED or lowered.endswith("ed"):
        return verb
    return f"{head}{dash}{third_person(lowered)}"


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]
