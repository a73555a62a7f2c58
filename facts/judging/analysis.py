"""A fact reduced to what the rules compare: normalised text, tokens (stemmed, synonyms merged), its negation,
content and value words, and the explicit change it states, if any."""

import functools
import unicodedata
from dataclasses import dataclass

from core import stemming

from .lexicon import (
    ALIASES,
    ATTRIBUTE_KEYS,
    CHANGE_MARKER,
    CHANGE_PATTERNS,
    CHANGEABLE_FAMILIES,
    CJK_CHAR,
    CJK_WORDS,
    CLAUSE_KEYS,
    CONTRACTIONS,
    DENIALS,
    EDGE_PUNCTUATION,
    EN_NUMBER,
    EN_NUMBERS,
    FRAME_KEYS,
    IRREGULAR,
    MARKER_FAMILIES,
    MAX_CHANGE_TEXT,
    MAX_WORDS_BEFORE_CHANGE,
    NEGATIONS,
    NEGATIONS_AT_START,
    PARTICLES,
    PHRASES,
    PLAN,
    PREFER_STEMS,
    PUNCTUATION,
    SOFT_WORDS,
    SPACE_BESIDE_CJK,
    SUBJECT_EN,
    SUBJECT_ZH,
    SYNONYMS,
    TIME_KEYS,
    TOKEN,
    UNSTEMMED,
    WORD_JOINER,
    ZH_DIGITS,
    ZH_NUMBER,
    ZH_ORDINAL,
)


@dataclass(frozen=True)
class Token:
    key: str  # what is compared: stemmed, synonyms merged ("prefers" -> "like")
    stem: str  # before synonyms, to tell "prefers" from "likes"
    text: str  # as written (lowercased), for reasons
    start: int = 0  # where the word is in the fact's body, so a reason can quote whole words ("成都", not "成")
    end: int = 0


@dataclass(frozen=True)
class AnalysedFact:
    text: str  # normalised
    tokens: tuple[Token, ...]
    negation: str  # the first negation word as written; "" for an affirmative fact
    content: frozenset[str]  # keys without frame words
    values: frozenset[str]  # content without attribute words: what the fact says the attribute is
    change: "Change | None" = None
    body: str = ""  # the text the tokens were cut from: subject dropped, phrases and numbers rewritten
    negation_at: int = 0  # how many words come before the negation: deep in a sentence it denies a clause only

    @property
    def core(self) -> frozenset[str]:
        """The content before a clause of time or reason: what a negated fact denies ("quit smoking last year")."""
        keys = []
        for token in self.tokens:
            if token.key in CLAUSE_KEYS:
                break
            keys.append(token.key)
        return frozenset(keys) - FRAME_KEYS - TIME_KEYS

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


@functools.lru_cache(maxsize=4096)  # a new fact is judged against 5 neighbours, and neighbours recur
def analyse(text: str, *, find_change: bool = True) -> AnalysedFact:
    normalised = _normalise(text)
    body = _numbers(_phrases(_drop_subject(normalised)))
    tokens, negation, negation_at = _tokenise(body)
    content = frozenset(token.key for token in tokens) - FRAME_KEYS
    find_change = (
        find_change
        and len(normalised) <= MAX_CHANGE_TEXT
        and CHANGE_MARKER.search(normalised) is not None
        and not PLAN.search(normalised)
    )
    return AnalysedFact(
        text=normalised,
        tokens=tokens,
        negation=negation,
        content=content,
        values=content - ATTRIBUTE_KEYS,
        change=_find_change(normalised) if find_change else None,
        body=body,
        negation_at=negation_at,
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


def _numbers(text: str) -> str:
    text = EN_NUMBER.sub(lambda match: EN_NUMBERS[match[1]], text)
    return ZH_ORDINAL.sub(r"\1", ZH_NUMBER.sub(lambda match: str(_zh_number(match[1])), text))


def _zh_number(numeral: str) -> int:
    """ "三" -> 3, "十二" -> 12, "二十" -> 20, "一百零五" -> 105: the numerals of counts, ages and hours."""
    total, digit = 0, 0
    for char in numeral:
        if char in ZH_DIGITS:
            digit = ZH_DIGITS[char]
        else:
            total += (digit or 1) * (10 if char == "十" else 100)
            digit = 0
    return total + digit


def _tokenise(text: str) -> tuple[tuple[Token, ...], str, int]:
    tokens: list[Token] = []
    negation, negation_at = "", 0
    for match in TOKEN.finditer(text):
        word = match.group()
        if word in NEGATIONS or (word in NEGATIONS_AT_START and not tokens):
            negation_at = negation_at if negation else len(tokens)
            negation = negation or word.replace("_", " ")
            continue
        if word in DENIALS:
            negation_at = negation_at if negation else len(tokens)
            negation = negation or word
            word = DENIALS[word]
        word = ALIASES.get(word, word)
        stem = word_stem(word)
        if word in SOFT_WORDS or stem in SOFT_WORDS:
            continue
        key = CJK_WORDS.get(word) or SYNONYMS.get(stem, stem)
        tokens.append(Token(key=key, stem=stem, text=word, start=match.start(), end=match.end()))
    return tuple(tokens), negation, negation_at


def word_stem(word: str) -> str:
    """The stem a word is compared by: "use", "uses", "used", "using" -> "use"; "went" -> "go" (a lemma, then its
    stem); "us", "c++", "咖啡" as they are."""
    if word in UNSTEMMED:
        return word
    return stemming.stem(IRREGULAR.get(word, word))


def _find_change(text: str) -> Change | None:
    for pattern in CHANGE_PATTERNS:
        match = pattern.search(text)
        if match is None or len(text[: match.start("verb")].split()) > MAX_WORDS_BEFORE_CHANGE:
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


def token_family(token: Token) -> str | None:
    if token.key == "like":
        return "prefer" if token.stem in PREFER_STEMS else None
    return token.key if token.key in CHANGEABLE_FAMILIES else None


def families(fact: AnalysedFact) -> frozenset[str]:
    return frozenset(family for token in fact.tokens if (family := token_family(token)))


def first_family(fact: AnalysedFact) -> str | None:
    return next((family for token in fact.tokens if (family := token_family(token))), None)


def states(fact: AnalysedFact, part: frozenset[str]) -> bool:
    """Whether `fact` says `part`: all of it, or all the fact's own value is within it."""
    what = fact.what
    return bool(part & what) and (part <= fact.content or what <= part)


def show(fact: AnalysedFact | None) -> str:
    if fact is None:
        return ""
    return join(token.text for token in fact.tokens if token.key not in FRAME_KEYS or token.key == "in")


def quote(fact: AnalysedFact, tokens: tuple[Token, ...]) -> str:
    """The words of `tokens` as the fact wrote them, from the first to the last, grown to whole CJK words over the
    characters the tokeniser dropped (the "都" of "成都" is also a filler word)."""
    if not tokens or not fact.body:
        return join(token.text for token in tokens)
    body = fact.body
    bare = {token.start for token in fact.tokens if _bare(token)}  # single characters of no known word
    covered = {index for token in fact.tokens for index in range(token.start, token.end)}
    start, end = tokens[0].start, tokens[-1].end
    if start in bare:
        while start - 1 in bare:
            start -= 1
    if end - 1 in bare or (end < len(body) and end not in covered):
        while end < len(body) and CJK_CHAR.match(body[end]) and body[end] not in PARTICLES:
            if end in covered and end not in bare:
                break
            end += 1
    return body[start:end].strip()


def _bare(token: Token) -> bool:
    return len(token.text) == 1 and token.key == token.text and bool(CJK_CHAR.match(token.text))


def join(words) -> str:
    shown = ""
    for word in words:
        beside_cjk = not shown or CJK_CHAR.match(word) or CJK_CHAR.match(shown[-1])
        shown += word if beside_cjk else " " + word
    return shown


def which_fact(is_new: bool) -> str:
    return "new" if is_new else "existing"
