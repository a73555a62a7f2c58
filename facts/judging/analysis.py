"""A fact reduced to what the rules compare: normalised text, tokens (stemmed, synonyms merged), its negation,
content and value words, and the explicit change it states, if any."""

import unicodedata
from dataclasses import dataclass

from core import stemming

from .lexicon import (
    ALIASES,
    ATTRIBUTE_KEYS,
    CHANGE_PATTERNS,
    CHANGEABLE_FAMILIES,
    CJK_CHAR,
    CJK_WORDS,
    CONTRACTIONS,
    DENIALS,
    EDGE_PUNCTUATION,
    FRAME_KEYS,
    IRREGULAR,
    MARKER_FAMILIES,
    MAX_CHANGE_TEXT,
    NEGATIONS,
    NEGATIONS_AT_START,
    PHRASES,
    PREFER_STEMS,
    PUNCTUATION,
    SOFT_WORDS,
    SPACE_BESIDE_CJK,
    SUBJECT_EN,
    SUBJECT_ZH,
    SYNONYMS,
    TOKEN,
    UNSTEMMED,
    WORD_JOINER,
)


@dataclass(frozen=True)
class Token:
    key: str  # what is compared: stemmed, synonyms merged ("prefers" -> "like")
    stem: str  # before synonyms, to tell "prefers" from "likes"
    text: str  # as written (lowercased), for reasons


@dataclass(frozen=True)
class AnalysedFact:
    text: str  # normalised
    tokens: tuple[Token, ...]
    negation: str  # the first negation word as written; "" for an affirmative fact
    content: frozenset[str]  # keys without frame words
    values: frozenset[str]  # content without attribute words: what the fact says the attribute is
    change: "Change | None" = None

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(token.key for token in self.tokens)

    @property
    def what(self) -> frozenset[str]:
        return self.values or self.content


@dataclass(frozen=True)
class Change:
    """An explicit change of value: "switched from X to Y", "从X换成Y", "now uses Y" (no X)."""

    marker: str
    old: AnalysedFact | None
    new: AnalysedFact
    families: frozenset[str]  # attributes the marker itself changes; empty when it names none


def analyse(text: str, *, find_change: bool = True) -> AnalysedFact:
    normalised = _normalise(text)
    tokens, negation = _tokenise(_phrases(_drop_subject(normalised)))
    content = frozenset(token.key for token in tokens) - FRAME_KEYS
    return AnalysedFact(
        text=normalised,
        tokens=tokens,
        negation=negation,
        content=content,
        values=content - ATTRIBUTE_KEYS,
        change=_find_change(normalised) if find_change and len(normalised) <= MAX_CHANGE_TEXT else None,
    )


def _normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower().translate(PUNCTUATION)
    for pattern, replacement in CONTRACTIONS:
        text = pattern.sub(replacement, text)
    text = SPACE_BESIDE_CJK.sub("", " ".join(WORD_JOINER.sub(" ", text).split()))
    return EDGE_PUNCTUATION.sub("", text)


def _drop_subject(text: str) -> str:
    for _ in range(3):  # "the user's team", "我们的项目" need more than one pass
        stripped = SUBJECT_ZH.sub("", SUBJECT_EN.sub("", text))
        if stripped == text:
            break
        text = stripped
    return text


def _phrases(text: str) -> str:
    for pattern, replacement in PHRASES:
        text = pattern.sub(replacement, text)
    return text


def _tokenise(text: str) -> tuple[tuple[Token, ...], str]:
    tokens: list[Token] = []
    negation = ""
    for match in TOKEN.finditer(text):
        word = match.group()
        if word in NEGATIONS or (word in NEGATIONS_AT_START and not tokens):
            negation = negation or word.replace("_", " ")
            continue
        if word in DENIALS:
            negation = negation or word
            word = DENIALS[word]
        word = ALIASES.get(word, word)
        stem = word_stem(word)
        if word in SOFT_WORDS or stem in SOFT_WORDS:
            continue
        key = CJK_WORDS.get(word) or SYNONYMS.get(stem, stem)
        tokens.append(Token(key=key, stem=stem, text=word))
    return tuple(tokens), negation


def word_stem(word: str) -> str:
    """The stem a word is compared by: "use", "uses", "used", "using" -> "use"; "went" -> "go" (a lemma, then its
    stem); "us", "c++", "咖啡" as they are."""
    if word in UNSTEMMED:
        return word
    return stemming.stem(IRREGULAR.get(word, word))


def _find_change(text: str) -> Change | None:
    for pattern in CHANGE_PATTERNS:
        match = pattern.search(text)
        if match is None:
            continue
        new = analyse(match["new"], find_change=False)
        old_text = match.groupdict().get("old")
        old = analyse(old_text, find_change=False) if old_text else None
        if not new.content or (old is not None and not old.content):
            continue
        marker = match["verb"]
        first_word = marker.split()[0]
        families = MARKER_FAMILIES.get(marker) or MARKER_FAMILIES.get(word_stem(first_word), frozenset())
        return Change(marker=marker, old=old, new=new, families=families)
    return None


def _token_family(token: Token) -> str | None:
    if token.key == "like":
        return "prefer" if token.stem in PREFER_STEMS else None
    return token.key if token.key in CHANGEABLE_FAMILIES else None


def families(fact: AnalysedFact) -> frozenset[str]:
    return frozenset(family for token in fact.tokens if (family := _token_family(token)))


def first_family(fact: AnalysedFact) -> str | None:
    return next((family for token in fact.tokens if (family := _token_family(token))), None)


def states(fact: AnalysedFact, part: frozenset[str]) -> bool:
    """Whether `fact` says `part`: all of it, or all the fact's own value is within it."""
    what = fact.what
    return bool(part & what) and (part <= fact.content or what <= part)


def show(fact: AnalysedFact | None) -> str:
    if fact is None:
        return ""
    return join(token.text for token in fact.tokens if token.key not in FRAME_KEYS or token.key == "in")


def join(words) -> str:
    shown = ""
    for word in words:
        beside_cjk = not shown or CJK_CHAR.match(word) or CJK_CHAR.match(shown[-1])
        shown += word if beside_cjk else " " + word
    return shown


def which_fact(is_new: bool) -> str:
    return "new" if is_new else "existing"
