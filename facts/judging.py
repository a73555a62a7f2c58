"""The offline judge: how a new fact relates to an existing fact of the same user, by rules alone.

Pure functions: no database, no model, no network. Facts are short statements in English or Chinese, written in
any person ("I prefer X", "User prefers X", "Prefers X", "我喜欢X"). Both are reduced to tokens (subjects, fillers
and negation words dropped, English crudely stemmed, synonyms merged, Chinese split into characters except for a
small lexicon of words) and compared by the rules in `_RULES`, the first that decides wins:

1. nothing to compare                                   -> unrelated
2. the same text after normalisation                    -> duplicate (1.0)
3. an explicit change in either fact: "switched from X to Y", "Y instead of X", "从X换成Y", "不再用X，改用Y"
   (the other states X: contradicts 0.9-0.95; states Y: refines/duplicate), or "moved to Y", "now uses Y", "改用Y"
   without X (the other sets the attribute the marker names to another value: contradicts 0.65-0.85)
4. one fact negated, the other not, the rest the same    -> contradicts (0.9-0.95; 0.6 when the scopes differ)
5. the same words, word forms and synonyms unified      -> duplicate (0.9-0.95)
6. the same comparison turned round ("tea over coffee") -> contradicts (0.8)
7. one fact's words contain the other's                 -> refines (new says more) / duplicate (new says less)
8. another value of one attribute, found by aligning the two facts on their common start and end:
   exclusive ("lives in", "name is", age, "住在", "叫")   -> contradicts (0.8-0.9)
   weak ("prefers", "uses X for", "偏好", "用X做")        -> contradicts (0.6) if the facts read alike, else unrelated
   non-exclusive ("likes", "uses", "喜欢")                -> unrelated
9. nearly the same words, and similar embeddings        -> duplicate (0.7)
10. anything else                                       -> unrelated

`similarity`, the cosine of the two facts' embeddings, only gates the weak rules: it is never the evidence of a
contradiction, because the hashing embedder scores paraphrases low and a sentence model scores opposites high.
"""

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from core.text import CJK


class Relation(StrEnum):
    DUPLICATE = "duplicate"
    REFINES = "refines"
    CONTRADICTS = "contradicts"
    UNRELATED = "unrelated"


@dataclass(frozen=True)
class Judgement:
    relation: Relation
    certainty: float  # 0..1, how sure the rule is; the caller supersedes the old fact from 0.75 up
    reason: str  # short and human-readable: "negation: 'no longer' in the new fact"


# A weakly exclusive attribute ("prefers X") may hold several values: only facts that read alike count as a clash.
WEAK_ATTRIBUTE_MIN_SIMILARITY = 0.5
# "switched to Y" with a marker that names no attribute: the facts must at least share a topic.
BARE_CHANGE_MIN_SIMILARITY = 0.2
# Nearly the same words only make a duplicate when the embeddings agree too.
CLOSE_WORDS_MIN_SIMILARITY = 0.5
CLOSE_WORDS_MIN_SHARE = 0.7

# --- normalisation --------------------------------------------------------------------------------------------------

_PUNCTUATION = str.maketrans(
    {"‘": "'", "’": "'", "`": "'", "´": "'", "“": '"', "”": '"', "„": '"', "«": '"', "»": '"', "。": ".", "、": ","}
)
_CONTRACTIONS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bwon't\b"), "will not"),
    (re.compile(r"\bcan't\b|\bcannot\b"), "can not"),
    (re.compile(r"\bshan't\b"), "shall not"),
    (re.compile(r"n't\b"), " not"),
    (re.compile(r"\bi'm\b"), "i am"),
    (re.compile(r"\b(he|she|it|that|there|what|who)'s\b"), r"\1 is"),
    (re.compile(r"'re\b"), " are"),
    (re.compile(r"'ve\b"), " have"),
    (re.compile(r"'ll\b"), " will"),
    (re.compile(r"'d\b"), " would"),
    (re.compile(r"'s\b|(?<=s)'(?=\s|$)"), ""),  # possessive: "the user's name" -> "the user name"
)
# "dark-mode" and "dark mode" are one phrase; a date "2023-05-12" stays one word.
_WORD_JOINER = re.compile(r"(?<=[^\W\d])[-/](?=\w)|(?<=\w)[-/](?=[^\W\d])")
_SPACE_BESIDE_CJK = re.compile(f"(?<=[{CJK}])\\s+|\\s+(?=[{CJK}])")
_EDGE_PUNCTUATION = re.compile(r"^[\s.,;:!?\"'()\[\]~*-]+|[\s.,;:!?\"'()\[\]~*-]+$")

_SUBJECT_EN = re.compile(
    r"^(?:(?:the|this|our|my|a)\s+)?(?:users?|customers?|clients?|team|person)\b\s*"
    r"|^(?:i|we|he|she|they|my|our|his|her|their|me)\b\s*"
)
_SUBJECT_ZH = re.compile("^(?:我们的|我们|咱们的|咱们|我的|我|用户的|用户|他们的|他们|她们的|她们|他的|她的|他|她)")

# Multi-word phrases that act as one word; the rest of the pipeline works word by word.
_PHRASES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bnot only\b"), " "),  # "not only X but also Y" denies nothing
    (re.compile(r"\bno longer\b"), " no_longer "),
    (re.compile(r"\bnot any ?more\b"), " not "),
    (re.compile(r"(?<!\bis )(?<!\bam )(?<!\bare )(?<!\bget )(?<!\bgot )\bused to\b"), " used_to "),
    (re.compile(r"\b(?:gave|given|give|gives|giving) up\b"), " gave_up "),
    (re.compile(r"\b(?:has|have|had) been\b"), " "),
    (re.compile(r"\byears? old\b"), " age "),
    (re.compile(r"\b(?:fond of|keen on|a fan of|a big fan of)\b"), " like "),
    (re.compile(r"\b(?:vs code|visual studio code)\b"), " vscode "),
    (re.compile(r"\b(?:rather than|instead of)\b"), " instead "),
    (re.compile(r"\bgo(?:es)? by\b"), " name "),
)

# --- vocabulary -----------------------------------------------------------------------------------------------------

_NEGATIONS = frozenset(
    {
        "not", "no", "never", "no_longer", "anymore", "used_to", "gave_up", "formerly", "previously",
        "stop", "stops", "stopped", "stopping", "quit", "quits", "quitting",
        "不再", "再也不", "从不", "从来不", "没", "不", "别", "停止", "停用", "戒掉", "戒了",
    }
)  # fmt: skip
_NEGATIONS_AT_START = frozenset({"以前", "过去"})  # "我以前住在…" denies the present; "上线以前" is just "before"
# Words that deny another word: "hates tea" reads as "not likes tea", "没有车" as "not 有车".
_DENIALS = {
    **{
        word: "like"
        for word in ("hate", "hates", "hated", "hating", "dislike", "dislikes", "disliked", "disliking", "detest",
                     "detests", "detested", "讨厌", "厌恶")
    },
    "没有": "有",
}  # fmt: skip
_SOFT_WORDS = frozenset(
    {
        "a", "an", "the", "do", "really", "very", "also", "still", "currently", "now", "nowadays", "just",
        "actually", "always", "usually", "generally", "mostly", "definitely", "strongly", "quite", "all", "every",
        "each", "so", "too", "much", "lot", "i", "me", "my", "mine", "myself", "we", "our", "ours", "will", "would",
        "shall", "can", "could", "please", "then", "some", "but", "only",
        "的", "了", "地", "得", "也", "还", "都", "很", "非常", "一直", "总是", "现在", "目前", "来", "着", "呢", "吧",
        "啊", "呀", "嘛", "我", "我们", "咱们", "今年", "平时", "通常", "一般", "比较", "特别", "真的", "正在", "已经",
        "就", "才", "更", "但是", "可是", "还是", "对于", "关于", "由于", "终于", "以前", "过去",
    }
)  # fmt: skip
# Chinese words worth keeping whole, with their key; every other Chinese character is a token of its own.
_CJK_WORDS = {
    "喜欢": "like", "喜爱": "like", "热爱": "like", "偏好": "like", "偏爱": "like", "更喜欢": "like",
    "最喜欢": "favorite", "最爱": "favorite",
    "使用": "use", "采用": "use", "利用": "use", "用": "use",
    "居住": "live", "生活": "live", "住": "live",
    "工作": "work", "上班": "work", "任职": "work", "就职": "work",
    "名字": "name", "名叫": "name", "叫做": "name", "叫": "name",
    "是": "be", "有": "have", "在": "in", "于": "in", "来自": "from", "出生": "born", "岁": "age", "年龄": "age",
    "和": "and", "与": "and", "跟": "and", "及": "and", "比": "than", "而不是": "instead",
    # words that contain a lexicon character but mean something else
    "用户": "用户", "应用": "应用", "不错": "不错", "不同": "不同", "不过": "不过", "不仅": "不仅", "不但": "不但",
    "不断": "不断", "不少": "不少", "不久": "不久", "不管": "不管", "存在": "存在",
}  # fmt: skip
_IRREGULAR = {
    "am": "be", "is": "be", "are": "be", "was": "be", "were": "be", "been": "be", "being": "be", "be": "be",
    "has": "have", "had": "have", "having": "have", "does": "do", "did": "do", "done": "do", "doing": "do",
    "went": "go", "gone": "go", "goes": "go", "made": "mak", "wrote": "writ", "written": "writ", "ran": "run",
    "born": "born", "left": "left", "children": "child", "people": "person",
}  # fmt: skip
_ALIASES = {"postgres": "postgresql", "js": "javascript", "ts": "typescript", "k8s": "kubernetes"}
# Stems (see _stem) that mean the same for this purpose; like/love/enjoy/prefer all state a liking.
_SYNONYMS = {
    "lik": "like", "lov": "like", "enjoy": "like", "prefer": "like", "ador": "like",
    "us": "use", "utiliz": "use", "utilis": "use",
    "liv": "live", "resid": "live", "bas": "live",
    "employ": "work", "job": "work",
    "nam": "name", "call": "name",
    "favorit": "favorite", "favourit": "favorite", "colour": "color", "ag": "age", "com": "come",
}  # fmt: skip
_PREFER_STEMS = frozenset({"prefer", "偏好", "偏爱", "更喜欢"})  # "prefers" picks one value, "likes" does not
# Frame words hold a statement together; they are not what it is about.
_FRAME_KEYS = frozenset(
    {"be", "in", "at", "for", "on", "of", "to", "by", "with", "from", "as", "and", "or", "about", "into", "than",
     "over", "instead"}
)  # fmt: skip
# Attribute words say which property a fact sets; the rest of its content is the value.
_ATTRIBUTE_KEYS = frozenset({"use", "like", "live", "work", "name", "have", "favorite", "age", "born", "come"})
# With these, "A over B" and "B over A" say different things: word order counts.
_ORDER_KEYS = frozenset({"over", "than", "instead", "from", "to"})
_COMPARISON_KEYS = frozenset({"over", "than", "instead"})
_CHANGEABLE_FAMILIES = frozenset({"use", "prefer", "live", "work"})

_CJK_CHAR = re.compile(f"[{CJK}]")
_LATIN_WORD = f"[^\\W_{CJK}]+(?:[+#]+)?(?:[-._'@][^\\W_{CJK}]+[+#]*)*"  # "c++", "node.js", "a@b.com"
_DATE = re.compile(r"\d{4}-\d{1,2}-\d{1,2}")
_CJK_LEXICON = sorted(
    {
        word
        for word in (*_CJK_WORDS, *_NEGATIONS, *_NEGATIONS_AT_START, *_DENIALS, *_SOFT_WORDS)
        if _CJK_CHAR.match(word)
    },
    key=len,
    reverse=True,
)
_TOKEN = re.compile("|".join([*_CJK_LEXICON, f"[{CJK}]", _LATIN_WORD]))

# --- explicit changes -----------------------------------------------------------------------------------------------

_EN_CHANGE_VERB = (
    r"(?P<verb>switch(?:ed|es|ing)?|mov(?:e|ed|es|ing)|migrat(?:e|ed|es|ing)|chang(?:e|ed|es|ing)"
    r"|relocat(?:e|ed|es|ing)|transition(?:ed|s|ing)?|convert(?:ed|s|ing)?)"
)
_OBJECT_WORDS = r"(?:[\w.+#]+\s+){0,3}?"  # "moved our database from X to Y"
_ZH_CHANGE_VERB = "|".join(
    ("换成", "换到", "换为", "改成", "改为", "改用", "转到", "转向", "转用", "转为", "迁移到", "迁到", "搬到", "搬去",
     "搬家到", "切换到", "切换成", "切到", "跳槽到", "换用")
)  # fmt: skip
# Each pattern names the change marker (verb), the new value Y and, when stated, the old value X.
_CHANGE_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(pattern)
    for pattern in (
        rf"\b{_EN_CHANGE_VERB}\s+{_OBJECT_WORDS}from\s+(?P<old>.+?)\s+(?:over\s+)?(?:to|into)\s+(?P<new>.+)",
        rf"\b{_EN_CHANGE_VERB}\s+{_OBJECT_WORDS}(?:over\s+)?to\s+(?P<new>.+?)\s+from\s+(?P<old>.+)",
        r"\b(?P<verb>replac(?:e|ed|es|ing))\s+(?P<old>.+?)\s+(?:with|by)\s+(?P<new>.+)",
        r"(?P<old>.+?)\s+(?:was|were|is|are|got|has been|have been)\s+(?P<verb>replaced)\s+(?:with|by)\s+(?P<new>.+)",
        r"(?P<new>.+?)\s+(?P<verb>instead of|rather than)\s+(?P<old>.+)",
        r"\b(?P<verb>no longer|not)\s+(?P<old>.+?)(?:\s+any ?more)?(?:\s*[,;]\s*|\s+)(?:(?:and|but)\s+)?"
        r"(?:now|instead)\s+(?P<new>.+)",
        r"\b(?P<verb>no longer|not)\s+(?!only\b)(?P<old>.+?)(?:\s+any ?more)?\s*,?\s+but\s+(?P<new>.+)",
        rf"\b{_EN_CHANGE_VERB}\s+{_OBJECT_WORDS}(?:over\s+)?to\s+(?P<new>.+)",
        r"\b(?P<verb>now)\s+(?P<new>(?:uses?|using|prefers?|preferring|lives?|living|works?|working|is based"
        r"|based|resides?|residing)\b.+)",
        rf"从(?P<old>.+?)(?P<verb>{_ZH_CHANGE_VERB})了?(?P<new>.+)",
        "把(?P<old>.+?)(?P<verb>换成|替换成|替换为|改成|改为|换为|迁移到)了?(?P<new>.+)",
        "(?:用|使用)(?P<new>.+?)(?P<verb>代替|取代|替换|替代)了?(?P<old>.+)",
        "(?P<new>.+?)(?P<verb>而不是)(?P<old>.+)",
        "(?P<verb>不再)(?P<old>.+?)[,;]\\s*(?:而是|而)?(?:改用|换成|换用|改成|改为|转用|现在)(?P<new>.+)",
        f"(?P<verb>{_ZH_CHANGE_VERB})了?(?P<new>.+)",
        "(?P<verb>现在)(?P<new>(?:用|使用|住在|住|在|偏好|更喜欢).+)",
    )
)
# Markers that change one attribute by themselves; every other marker ("switched", "换成") names none.
_MARKER_FAMILIES = {
    "mov": frozenset({"live"}), "relocat": frozenset({"live"}), "migrat": frozenset({"use"}),
    "搬到": frozenset({"live"}), "搬去": frozenset({"live"}), "搬家到": frozenset({"live"}),
    "改用": frozenset({"use"}), "换用": frozenset({"use"}), "转用": frozenset({"use"}),
    "迁移到": frozenset({"use"}), "迁到": frozenset({"use"}), "跳槽到": frozenset({"work"}),
}  # fmt: skip
# Change markers are looked for in statements, not in long notes (where the lazy patterns also get slow).
_MAX_CHANGE_TEXT = 300
# Certainty of "switched to Y" against another value of the attribute the marker names ("moved to", "now uses").
_NAMED_CHANGE_CERTAINTY = {"live": 0.85, "work": 0.85, "use": 0.65, "prefer": 0.65}
# A marker that names no attribute ("switched to", "换成") is taken to change a tool or a preference, never a home
# or an employer: those are changed with words of their own ("moved to", "搬到", "joined").
_UNNAMED_CHANGE_FAMILIES = frozenset({"use", "prefer"})
_UNNAMED_CHANGE_CERTAINTY = 0.6


# --- analysed facts -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Token:
    key: str  # what is compared: stemmed, synonyms merged ("prefers" -> "like")
    stem: str  # before synonyms, to tell "prefers" from "likes"
    text: str  # as written (lowercased), for reasons


@dataclass(frozen=True)
class _Fact:
    text: str  # normalised
    tokens: tuple[_Token, ...]
    negation: str  # the first negation word as written; "" for an affirmative fact
    content: frozenset[str]  # keys without frame words
    values: frozenset[str]  # content without attribute words: what the fact says the attribute is
    change: "_Change | None" = None

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(token.key for token in self.tokens)

    @property
    def what(self) -> frozenset[str]:
        return self.values or self.content


@dataclass(frozen=True)
class _Change:
    """An explicit change of value: "switched from X to Y", "从X换成Y", "now uses Y" (no X)."""

    marker: str
    old: _Fact | None
    new: _Fact
    families: frozenset[str]  # attributes the marker itself changes; empty when it names none


def _analyse(text: str, *, find_change: bool = True) -> _Fact:
    normalised = _normalise(text)
    tokens, negation = _tokenise(_phrases(_drop_subject(normalised)))
    content = frozenset(token.key for token in tokens) - _FRAME_KEYS
    return _Fact(
        text=normalised,
        tokens=tokens,
        negation=negation,
        content=content,
        values=content - _ATTRIBUTE_KEYS,
        change=_find_change(normalised) if find_change and len(normalised) <= _MAX_CHANGE_TEXT else None,
    )


def _normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower().translate(_PUNCTUATION)
    for pattern, replacement in _CONTRACTIONS:
        text = pattern.sub(replacement, text)
    text = _SPACE_BESIDE_CJK.sub("", " ".join(_WORD_JOINER.sub(" ", text).split()))
    return _EDGE_PUNCTUATION.sub("", text)


def _drop_subject(text: str) -> str:
    for _ in range(3):  # "the user's team", "我们的项目" need more than one pass
        stripped = _SUBJECT_ZH.sub("", _SUBJECT_EN.sub("", text))
        if stripped == text:
            break
        text = stripped
    return text


def _phrases(text: str) -> str:
    for pattern, replacement in _PHRASES:
        text = pattern.sub(replacement, text)
    return text


def _tokenise(text: str) -> tuple[tuple[_Token, ...], str]:
    tokens: list[_Token] = []
    negation = ""
    for match in _TOKEN.finditer(text):
        word = match.group()
        if word in _NEGATIONS or (word in _NEGATIONS_AT_START and not tokens):
            negation = negation or word.replace("_", " ")
            continue
        if word in _DENIALS:
            negation = negation or word
            word = _DENIALS[word]
        word = _ALIASES.get(word, word)
        stem = _stem(word)
        if word in _SOFT_WORDS or stem in _SOFT_WORDS:
            continue
        key = _CJK_WORDS.get(word) or _SYNONYMS.get(stem, stem)
        tokens.append(_Token(key=key, stem=stem, text=word))
    return tuple(tokens), negation


def _stem(word: str) -> str:
    """Crude English stemming: the forms of one word land on one stem ("use", "uses", "used", "using" -> "us")."""
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    if not (word.isascii() and word.isalpha()) or len(word) < 3:
        return word
    stem, cut = word, False
    if word.endswith(("ies", "ied")) and len(word) > 4:
        stem = word[:-3] + "y"
    elif word.endswith("eed"):
        stem = word[:-1] if len(word) > 5 else word  # "agreed" -> "agree", but "need" stays
    elif word.endswith("ing") and len(word) > 4:
        stem, cut = word[:-3], True
    elif word.endswith("ed") and len(word) > 3:
        stem, cut = word[:-2], True
    elif word.endswith("es") and word[:-2].endswith(("s", "x", "z", "ch", "sh")):
        stem = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        stem = word[:-1]
    if cut and len(stem) > 2 and stem[-1] == stem[-2] and stem[-1] not in "lsz":
        stem = stem[:-1]  # "preferred" -> "prefer", "stopped" -> "stop"
    if stem.endswith("e") and len(stem) > 2:
        stem = stem.rstrip("e") or stem
    return stem


def _find_change(text: str) -> _Change | None:
    for pattern in _CHANGE_PATTERNS:
        match = pattern.search(text)
        if match is None:
            continue
        new = _analyse(match["new"], find_change=False)
        old_text = match.groupdict().get("old")
        old = _analyse(old_text, find_change=False) if old_text else None
        if not new.content or (old is not None and not old.content):
            continue
        marker = match["verb"]
        first_word = marker.split()[0]
        families = _MARKER_FAMILIES.get(marker) or _MARKER_FAMILIES.get(_stem(first_word), frozenset())
        return _Change(marker=marker, old=old, new=new, families=families)
    return None


def _token_family(token: _Token) -> str | None:
    if token.key == "like":
        return "prefer" if token.stem in _PREFER_STEMS else None
    return token.key if token.key in _CHANGEABLE_FAMILIES else None


def _families(fact: _Fact) -> frozenset[str]:
    return frozenset(family for token in fact.tokens if (family := _token_family(token)))


def _family(fact: _Fact) -> str | None:
    return next((family for token in fact.tokens if (family := _token_family(token))), None)


def _states(fact: _Fact, part: frozenset[str]) -> bool:
    """Whether `fact` says `part`: all of it, or all the fact's own value is within it."""
    what = fact.what
    return bool(part & what) and (part <= fact.content or what <= part)


def _show(fact: _Fact | None) -> str:
    if fact is None:
        return ""
    return _join(token.text for token in fact.tokens if token.key not in _FRAME_KEYS or token.key == "in")


def _join(words) -> str:
    shown = ""
    for word in words:
        beside_cjk = not shown or _CJK_CHAR.match(word) or _CJK_CHAR.match(shown[-1])
        shown += word if beside_cjk else " " + word
    return shown


def _where(is_new: bool) -> str:
    return "new" if is_new else "existing"


# --- rules ----------------------------------------------------------------------------------------------------------

Rule = Callable[[_Fact, _Fact, float], Judgement | None]


def _nothing_to_compare(new: _Fact, old: _Fact, similarity: float) -> Judgement | None:
    if new.tokens and old.tokens:
        return None
    return Judgement(Relation.UNRELATED, 0.5, "nothing to compare: a fact has no words left after normalisation")


def _same_text(new: _Fact, old: _Fact, similarity: float) -> Judgement | None:
    if new.text != old.text:
        return None
    return Judgement(Relation.DUPLICATE, 1.0, "same statement after normalisation")


def _explicit_change(new: _Fact, old: _Fact, similarity: float) -> Judgement | None:
    if new.change is not None:
        judgement = _judge_change(new.change, old, similarity, change_is_new=True)
        if judgement is not None:
            return judgement
    if old.change is not None:
        return _judge_change(old.change, new, similarity, change_is_new=False)
    return None


def _judge_change(change: _Change, other: _Fact, similarity: float, *, change_is_new: bool) -> Judgement | None:
    """How a fact stating `change` relates to `other`, judged by what `other` says now."""
    where = _where(change_is_new)
    to_values = change.new.what
    from_values = change.old.what if change.old else frozenset()
    summary = f"'{change.marker}' " + (f"{_show(change.old)} -> " if change.old else "to ") + _show(change.new)
    if other.change is not None:
        same_from = change.old is None or other.change.old is None or _states(other.change.old, from_values)
        if _states(other.change.new, to_values) and same_from:
            return Judgement(Relation.DUPLICATE, 0.9, f"both facts describe the same change: {summary}")
        current = other.change.new  # what the other fact says holds now
    else:
        current = other
    says_from = bool(from_values) and _states(current, from_values)
    says_to = _states(current, to_values)
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
            f"replacement: {summary} in the {where} fact; the other still states {_show(change.old)}",
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


def _bare_change(change: _Change, other: _Fact, similarity: float, where: str, summary: str) -> Judgement | None:
    """ "switched to Y" against a fact that sets the same attribute to something else."""
    family = _family(other)
    if family is None or other.negation:
        return None
    named = change.families | _families(change.new)
    if named and family not in named:
        return None
    if not named and (family not in _UNNAMED_CHANGE_FAMILIES or similarity < BARE_CHANGE_MIN_SIMILARITY):
        return None
    if not other.values or other.values & change.new.what:
        return None  # no value, or a value partly shared with Y: not clearly another one
    certainty = _NAMED_CHANGE_CERTAINTY[family] if named else _UNNAMED_CHANGE_CERTAINTY
    how = "the marker names it" if named else f"similarity {similarity:.2f}"
    return Judgement(
        Relation.CONTRADICTS, certainty, f"change: {summary} in the {where} fact; the other sets '{family}' ({how})"
    )


def _negation(new: _Fact, old: _Fact, similarity: float) -> Judgement | None:
    if bool(new.negation) == bool(old.negation):
        return None
    negated, affirmed = (new, old) if new.negation else (old, new)
    shared = negated.content & affirmed.content
    if not shared or not (shared - _ATTRIBUTE_KEYS or negated.content <= _ATTRIBUTE_KEYS):
        return None
    if negated.content == affirmed.content:
        certainty = 0.95
    elif negated.content <= affirmed.content and len(negated.content) >= 2:
        certainty = 0.9  # "never drinks coffee" denies "drinks coffee every morning"
    elif len(shared) / min(len(negated.content), len(affirmed.content)) >= 0.75:
        certainty = 0.6  # "does not use MySQL for analytics" may leave "uses MySQL" true
    else:
        return None
    reason = f"negation: '{negated.negation}' in the {_where(negated is new)} fact"
    return Judgement(Relation.CONTRADICTS, certainty, reason)


def _same_words(new: _Fact, old: _Fact, similarity: float) -> Judgement | None:
    if bool(new.negation) != bool(old.negation) or not new.content:
        return None
    if new.keys == old.keys:
        return Judgement(Relation.DUPLICATE, 0.95, "same words once subjects, word forms and synonyms are unified")
    if new.content == old.content and not _order_matters(new, old):
        return Judgement(Relation.DUPLICATE, 0.9, "same words in another order")
    return None


def _reversed_comparison(new: _Fact, old: _Fact, similarity: float) -> Judgement | None:
    if bool(new.negation) != bool(old.negation) or new.content != old.content:
        return None
    if not set(new.keys) & _COMPARISON_KEYS or new.keys == old.keys:
        return None
    return Judgement(Relation.CONTRADICTS, 0.8, "the same comparison the other way round")


def _containment(new: _Fact, old: _Fact, similarity: float) -> Judgement | None:
    if bool(new.negation) != bool(old.negation):
        return None
    if old.values and old.content < new.content and _in_order(old, new):
        extra = _join(token.text for token in new.tokens if token.key in new.content - old.content)
        return Judgement(Relation.REFINES, 0.85, f"the new fact says the existing one and more: {extra}")
    if new.values and new.content < old.content and _in_order(new, old):
        return Judgement(Relation.DUPLICATE, 0.85, "the new fact says less than the existing one")
    return None


def _order_matters(first: _Fact, second: _Fact) -> bool:
    return bool((set(first.keys) | set(second.keys)) & _ORDER_KEYS)


def _in_order(shorter: _Fact, longer: _Fact) -> bool:
    if not _order_matters(shorter, longer):
        return True
    remaining = iter(longer.keys)
    return all(key in remaining for key in shorter.keys)  # a subsequence: "tea over coffee" stays in that order


@dataclass(frozen=True)
class _Slot:
    """Two facts aligned on their common start and end: the frame around the value where they differ."""

    prefix: tuple[str, ...]
    suffix: tuple[str, ...]
    new_value: tuple[_Token, ...]
    old_value: tuple[_Token, ...]
    new_last: _Token | None  # last token of the prefix in each fact: same key, perhaps another word
    old_last: _Token | None

    def prefix_ends(self, *keys: str) -> bool:
        return self.prefix[-len(keys) :] == keys

    def suffix_starts(self, *keys: str) -> bool:
        return self.suffix[: len(keys)] == keys

    @property
    def numeric(self) -> bool:
        values = (self.new_value, self.old_value)
        return all(len(value) == 1 and value[0].key.replace(".", "", 1).isdigit() for value in values)

    @property
    def dated(self) -> bool:
        values = (self.new_value, self.old_value)
        return all(len(value) == 1 and _DATE.fullmatch(value[0].key) for value in values)

    @property
    def prefers_on_both_sides(self) -> bool:
        return all(last is not None and last.stem in _PREFER_STEMS for last in (self.new_last, self.old_last))

    @property
    def attribute_before_copula(self) -> bool:
        return any(key not in _FRAME_KEYS and key not in _ATTRIBUTE_KEYS for key in self.prefix[:-1])

    @property
    def comparable_values(self) -> bool:
        """Whether the two values look like answers to one question: "MySQL"/"PostgreSQL", not "tea"/"dark mode"."""
        return bool(self.suffix) or _value_shape(self.new_value) == _value_shape(self.old_value)

    @property
    def qualified(self) -> bool:
        return bool(self.suffix) and (self.suffix[0] in {"for", "as", "to"} or bool(_CJK_CHAR.match(self.suffix[0])))


def _value_shape(value: tuple[_Token, ...]) -> tuple[bool, int]:
    """Script and rough length of a value: words for English; for Chinese 1-2 characters (a word) or more."""
    chinese = all(_CJK_CHAR.match(token.text) for token in value)
    return chinese, (min(len(value), 3) // 3 if chinese else len(value))


@dataclass(frozen=True)
class _Attribute:
    name: str
    certainty: float
    matches: Callable[[_Slot], bool]
    weak: bool = False  # may hold several values: needs similar facts, and a human settles it


def _is_name(slot: _Slot) -> bool:
    return slot.prefix_ends("name", "be") or slot.prefix_ends("name")  # "name is X", "is called X", "叫X"


def _is_age(slot: _Slot) -> bool:
    # "is 30 years old", "age is 30", "30岁", and a bare "is 30" of a fact about the user
    return slot.numeric and (slot.suffix_starts("age") or slot.prefix_ends("age", "be") or slot.prefix == ("be",))


def _is_birth(slot: _Slot) -> bool:
    return slot.prefix_ends("born", "in") or slot.prefix_ends("born", "on")


def _is_home(slot: _Slot) -> bool:
    return slot.prefix_ends("live", "in")  # "lives in", "is based in", "住在"


def _is_employer(slot: _Slot) -> bool:
    at_work = any(slot.prefix_ends("work", preposition) for preposition in ("at", "for", "in", "as"))
    return at_work or (slot.prefix_ends("in") and slot.suffix_starts("work"))  # "在X工作"


def _is_origin(slot: _Slot) -> bool:
    return slot.prefix_ends("be", "from") or slot.prefix_ends("come", "from") or slot.prefix == ("from",)


def _is_favourite(slot: _Slot) -> bool:
    return ("favorite" in slot.prefix and slot.prefix_ends("be")) or slot.prefix_ends("favorite")


def _is_count(slot: _Slot) -> bool:
    return slot.numeric and bool(slot.suffix)  # "has 2 kids" / "has 3 kids"


def _is_copula(slot: _Slot) -> bool:
    return slot.prefix_ends("be") and slot.attribute_before_copula  # "timezone is CET"


def _is_preference(slot: _Slot) -> bool:
    return slot.prefix_ends("like") and slot.prefers_on_both_sides and slot.comparable_values


def _is_tool_for(slot: _Slot) -> bool:
    return slot.prefix_ends("use") and slot.qualified  # "uses Vim as editor", "用Jira管理任务"


# First match wins: the specific before the general.
_ATTRIBUTES: tuple[_Attribute, ...] = (
    _Attribute("name", 0.9, _is_name),
    _Attribute("age", 0.9, _is_age),
    _Attribute("born", 0.9, _is_birth),
    _Attribute("lives in", 0.85, _is_home),
    _Attribute("works at", 0.85, _is_employer),
    _Attribute("comes from", 0.85, _is_origin),
    _Attribute("favourite", 0.85, _is_favourite),
    _Attribute("a count", 0.8, _is_count),
    # An event moved to another day is likely rescheduled, but the same thing may happen twice: a human decides.
    _Attribute("date", 0.7, lambda slot: slot.dated),
    _Attribute("<attribute> is", 0.8, _is_copula),
    _Attribute("prefers", 0.6, _is_preference, weak=True),
    _Attribute("uses … for", 0.6, _is_tool_for, weak=True),
)


def _align(new: _Fact, old: _Fact) -> _Slot | None:
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
    return _Slot(
        prefix=new_keys[:start],
        suffix=new_keys[len(new_keys) - end :],
        new_value=new_value,
        old_value=old_value,
        new_last=new.tokens[start - 1] if start else None,
        old_last=old.tokens[start - 1] if start else None,
    )


def _value_change(new: _Fact, old: _Fact, similarity: float) -> Judgement | None:
    if bool(new.negation) != bool(old.negation):
        return None
    slot = _align(new, old)
    if slot is None:
        return None
    attribute = next((attribute for attribute in _ATTRIBUTES if attribute.matches(slot)), None)
    old_value, new_value = _join(t.text for t in slot.old_value), _join(t.text for t in slot.new_value)
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


def _close_words(new: _Fact, old: _Fact, similarity: float) -> Judgement | None:
    if bool(new.negation) != bool(old.negation) or similarity < CLOSE_WORDS_MIN_SIMILARITY:
        return None
    union = new.content | old.content
    share = len(new.content & old.content) / len(union) if union else 0.0
    if share < CLOSE_WORDS_MIN_SHARE:
        return None
    slot = _align(new, old)
    if slot is not None and len(slot.new_value) == 1 and len(slot.old_value) == 1:
        return None  # one word swapped for another is a changed value, not a rewording
    return Judgement(Relation.DUPLICATE, 0.7, f"nearly the same words ({share:.0%} shared)")


_RULES: tuple[Rule, ...] = (
    _nothing_to_compare,
    _same_text,
    _explicit_change,
    _negation,
    _same_words,
    _reversed_comparison,
    _containment,
    _value_change,
    _close_words,
)


def judge_by_rules(new: str, existing: str, *, similarity: float) -> Judgement:
    """How `new` relates to `existing`, both facts of one user; `similarity` is their embeddings' cosine."""
    new_fact, existing_fact = _analyse(new), _analyse(existing)
    for rule in _RULES:
        judgement = rule(new_fact, existing_fact, similarity)
        if judgement is not None:
            return judgement
    return Judgement(Relation.UNRELATED, 0.6, "no shared statement: compatible or about different things")
