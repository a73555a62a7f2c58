"""Offline extraction of explicit statements from a conversation: "I prefer…", "my name is…", "我住在…".

Pure functions: no database, no model, no network. Only the user's messages are mined. Each is cut into sentences
(fenced code, code-like lines, questions, small talk and anything secret left out), each sentence into clauses
("I live in Berlin and I work at Google" holds two), and every clause that opens with a known statement pattern
becomes one fact: an atomic statement without its leading "I"/"我" ("Prefers dark mode", "喜欢用 Vim"), with
relative dates made absolute from `reference_time` ("next Friday" -> "on 2023-05-12", "下周五" -> "2023-05-12").
"""

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta

CATEGORIES = ("preference", "profile", "project", "decision", "procedure", "other")
MAX_SENTENCE_CHARS = 300  # longer "sentences" are pasted text, not statements
HEDGED_CONFIDENCE = 0.5


@dataclass(frozen=True)
class ExtractedFact:
    content: str  # "Prefers dark mode", "Lives in Berlin", "喜欢用 Vim", "决定2023-05-12发布"
    category: str  # one of CATEGORIES
    confidence: float  # 0..1


# --- what is never mined --------------------------------------------------------------------------------------------

_FENCED_CODE = re.compile(r"^[ \t]*(```|~~~).*?(?:^[ \t]*\1[^\n]*$|\Z)", re.DOTALL | re.MULTILINE)
# Case-sensitive on purpose: "import x" is code, "Important: ..." is not.
_CODE_LINE = re.compile(
    r"^(?: {4,}|\t)\S"
    r"|^\s*(?:\$ |>>> |#include|def |class |import |from \S+ import |function |const |let |var |return |SELECT |"
    r"INSERT |UPDATE |DELETE |CREATE |ALTER |pip |npm |git |docker |curl |sudo |cd |ls )"
    r"|[{}]\s*$|=>|==|!=|&&|\|\||^\s*[\w.\[\]]+\s*[-+*/]?=\s*\S|^\s*[\w.]+\([^)]*\)\s*;?\s*$"
)
# An instruction not to keep something makes the whole message off limits: the secret is often the next sentence.
_DO_NOT_REMEMBER = re.compile(
    r"\b(?:do not|don't|dont|no need to)\s+(?:remember|memori[sz]e)\b"
    r"|\b(?:do not|don't|dont)\s+(?:save|store|record|keep|note)\s+(?:this|that|it|any of this|what i)\b"
    r"|(?<!don't )(?<!not )\bforget (?:this|that|it|what i said)\b"
    r"|\bkeep (?:this|that|it) (?:a )?(?:secret|private|between us)\b|\boff the record\b"
    r"|不要记住|不要记|别记|不用记|不要保存|别保存|不要存|保密|忘掉这|忘了这",
    re.IGNORECASE,
)
_SENSITIVE = re.compile(
    r"\b(?:secrets?|passwords?|passwd|passphrase|api[ _-]?keys?|access tokens?|private keys?|credit cards?|ssn"
    r"|social security)\b|密码|秘密|私钥|口令|信用卡",
    re.IGNORECASE,
)
_QUESTION_START = re.compile(
    r"^(?:who|what|when|where|why|how|which|can|could|would|will|should|shall|do|does|did|is|are|am|was|were"
    r"|have|has)\b|^(?:为什么|怎么|什么|哪|是否|能不能|可不可以|要不要)",
    re.IGNORECASE,
)
_QUESTION_END = re.compile(r"(?:[?？]|吗[。.!！]?)\s*$")
_SMALL_TALK_PREFIX = re.compile(
    r"^(?:(?:ok(?:ay)?|thanks|thank you|thx|hi|hello|hey|well|so|also|oh|btw|by the way|and|but|actually|fyi"
    r"|great|cool|sure|yes|yeah|no|nope|anyway|alright)\b[\s,!.:;-]*)+"
    r"|^(?:(?:好的|好吧|好|嗯|谢谢|另外|还有|对了|顺便说一下|顺便说|顺便|哦|噢|其实|所以)[，,\s!！:：]*)+",
    re.IGNORECASE,
)
_TRAILING_SMALL_TALK = re.compile(
    r"(?:[,，]?\s*\b(?:thanks|thank you|thx|please|lol|maybe|probably|perhaps|i think|i guess)\b"
    r"|谢谢|吧|呢|啦|哦|啊|了)?[\s.!?;:,。！？；：，~]*$",
    re.IGNORECASE,
)
_HEDGE = re.compile(
    r"\b(?:i think|i guess|i believe|i suppose|maybe|perhaps|probably|might|possibly|not sure)\b"
    r"|可能|也许|大概|或许|我觉得|我想|好像",
    re.IGNORECASE,
)
_HEDGE_PREFIX = re.compile(
    r"^(?:(?:i think|i guess|i believe|i suppose|maybe|perhaps|probably)(?:\s+that)?[,\s]+)+"
    r"|^(?:(?:我觉得|我想|可能|也许|大概|或许)[，,\s]*)+",
    re.IGNORECASE,
)
# "I love it" says nothing worth keeping without the conversation around it.
_VAGUE_OBJECT = re.compile(
    r"^(?:it|this|that|them|these|those|you|this one|that one|that idea|the idea)"
    r"(?:\s+(?:a lot|so much|very much|too|as well))?$|^(?:这个|那个|它|你|这|那|这样|那样)$",
    re.IGNORECASE,
)

# --- sentences and clauses ------------------------------------------------------------------------------------------

_LIST_MARKER = re.compile(r"^\s*(?:[-*•>]|\d+[.)])\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；])|\n")
_CLAUSE_BREAK = re.compile(
    r"\s*(?:,\s*|\s+)(?:and|but|also)\s+(?=(?:i|i'm|we|we're|my|our)\b)|[，,]\s*(?:而且|但是|并且|但|而|还有)?(?=我)",
    re.IGNORECASE,
)

# --- statements -----------------------------------------------------------------------------------------------------

_ADV = (
    r"(?:(?:really|also|usually|generally|mostly|definitely|strongly|actually|still|now|currently|just|totally"
    r"|absolutely|much|kind of|sort of|probably|maybe|personally|very)\s+)*"
)
_ZH_ADV = "(?:也|还|一直|都|比较|非常|很|特别|真的|现在|目前|平时|通常|一般|其实|确实|个人|可能|也许|大概|或许)*"
_ZH_SUBJECT = "我(?!们)"


@dataclass(frozen=True)
class _Pattern:
    regex: re.Pattern[str]
    build: Callable[[re.Match[str]], str]  # the fact's content, from the match
    category: str | Callable[[re.Match[str]], str]
    confidence: float
    needs_date: bool = False  # only a statement when it names a day: "we release next Friday"


def _en(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


def _third_person(verb: str) -> str:
    """ "prefer" -> "prefers", "can't stand" stays: the verb of a statement once its "I" is gone."""
    head, _, tail = verb.lower().partition(" ")
    irregular = {"be": "is", "am": "is", "have": "has", "do": "does", "go": "goes", "can't": "can't"}
    if head in irregular:
        head = irregular[head]
    elif head.endswith(("s", "sh", "ch", "x", "z", "o")):
        head += "es"
    elif head.endswith("y") and head[-2:-1] not in ("a", "e", "i", "o", "u"):
        head = head[:-1] + "ies"
    else:
        head += "s"
    return f"{head} {tail}".strip()


def _attribute_category(attribute: str) -> str:
    if re.search(r"favou?rite|preferred|最喜欢|最爱|偏好", attribute, re.IGNORECASE):
        return "preference"
    if re.search(r"project|app|repo|team|stack|codebase|service|deadline|release|项目|仓库|团队|系统", attribute, re.I):
        return "project"
    return "profile"


_STATEMENTS: tuple[_Pattern, ...] = (
    # procedures
    _Pattern(
        _en(r"^(?:please\s+)?(?:always\s+)?(?:remember|don't forget|do not forget)\s+to\s+(?P<rest>.+)"),
        lambda m: f"Remember to {m['rest']}",
        "procedure",
        0.9,
    ),
    _Pattern(
        _en(r"^(?:please\s+)?(?:(?:i|we)\s+)?(?P<adv>always|never)\s+(?P<rest>.+)"),
        lambda m: f"{m['adv'].capitalize()} {m['rest']}",
        "procedure",
        0.8,
    ),
    # preferences
    _Pattern(
        _en(rf"^i\s+{_ADV}(?:do not|don't|dont)\s+{_ADV}(?P<verb>like|love|enjoy|use|want)\s+(?P<rest>.+)"),
        lambda m: f"Doesn't {m['verb'].lower()} {m['rest']}",
        "preference",
        0.85,
    ),
    _Pattern(
        _en(rf"^i\s+{_ADV}(?P<verb>hate|dislike|detest|can't stand|cannot stand)\s+(?P<rest>.+)"),
        lambda m: f"{_third_person(m['verb'])} {m['rest']}",
        "preference",
        0.85,
    ),
    _Pattern(
        _en(rf"^i\s+{_ADV}(?P<verb>prefer|like|love|enjoy|adore)\s+(?P<rest>.+)"),
        lambda m: f"{_third_person(m['verb'])} {m['rest']}",
        "preference",
        0.85,
    ),
    _Pattern(
        _en(rf"^i(?:'m|\s+am)\s+{_ADV}(?:using|working with)\s+(?P<rest>.+)"),
        lambda m: f"Uses {m['rest']}",
        "preference",
        0.8,
    ),
    _Pattern(_en(rf"^i\s+{_ADV}use\s+(?P<rest>.+)"), lambda m: f"Uses {m['rest']}", "preference", 0.8),
    # profile
    _Pattern(
        _en(rf"^i(?:'m|\s+am)?\s+{_ADV}(?:work|working)\s+(?P<prep>at|for|as|in|on|with)\s+(?P<rest>.+)"),
        lambda m: f"Works {m['prep'].lower()} {m['rest']}",
        lambda m: "project" if m["prep"].lower() in ("on", "with") else "profile",
        0.85,
    ),
    _Pattern(
        _en(rf"^i(?:'m|\s+am)?\s+{_ADV}(?:live|living|reside|residing)\s+in\s+(?P<rest>.+)"),
        lambda m: f"Lives in {m['rest']}",
        "profile",
        0.85,
    ),
    _Pattern(
        _en(rf"^i(?:'m|\s+am)\s+{_ADV}based\s+in\s+(?P<rest>.+)"),
        lambda m: f"Is based in {m['rest']}",
        "profile",
        0.85,
    ),
    _Pattern(
        _en(r"^(?:my\s+name\s+is|my\s+name's|i(?:'m|\s+am)\s+called|(?:please\s+)?call\s+me)\s+(?P<rest>.+)"),
        lambda m: f"Name is {m['rest']}",
        "profile",
        0.85,
    ),
    _Pattern(
        _en(r"^i(?:'m|\s+am)\s+(?P<age>\d{1,3})(?:\s+(?:years?\s+old|yo))?$"),
        lambda m: f"Is {m['age']} years old",
        "profile",
        0.85,
    ),
    _Pattern(
        _en(rf"^i(?:'m|\s+am)\s+{_ADV}(?P<article>an?)\s+(?!bit\b|little\b|lot\b|fan\b)(?P<rest>.+)"),
        lambda m: f"Is {m['article'].lower()} {m['rest']}",
        "profile",
        0.8,
    ),
    _Pattern(
        _en(r"^my\s+(?P<attribute>[^,.;:!?]{1,40}?)\s+(?P<verb>is|are)\s+(?P<rest>.+)"),
        lambda m: f"{m['attribute']} {m['verb'].lower()} {m['rest']}",
        lambda m: _attribute_category(m["attribute"]),
        0.85,
    ),
    # decisions
    _Pattern(
        _en(
            rf"^(?:we|i)(?:'ve|\s+have)?\s+{_ADV}(?:finally\s+)?(?P<verb>decided|agreed|chose|settled)"
            r"(?:\s+(?P<how>to|on|that|upon))?\s+(?P<rest>.+)"
        ),
        lambda m: " ".join(part for part in (m["verb"].capitalize(), (m["how"] or "").lower(), m["rest"]) if part),
        "decision",
        0.85,
    ),
    # projects
    _Pattern(
        _en(
            rf"^we(?:'re|\s+are)\s+{_ADV}(?:going\s+to\s+)?(?:moving|migrating|switching|transitioning|move|migrate"
            r"|switch)\s+(?P<rest>(?:from\s+.+?\s+)?to\s+.+)"
        ),
        lambda m: f"Moving {m['rest']}",
        "project",
        0.8,
    ),
    _Pattern(
        _en(
            rf"^we(?:'ve|\s+have)?\s+{_ADV}(?P<verb>switched|migrated|moved)"
            r"\s+(?P<rest>(?:[\w.+#-]+\s+){0,3}?(?:from\s+.+?\s+)?to\s+.+)"
        ),
        lambda m: f"{m['verb'].capitalize()} {m['rest']}",
        "project",
        0.85,
    ),
    _Pattern(
        _en(rf"^we\s+{_ADV}(?P<negation>no longer|don't|do not)\s+use\s+(?P<rest>.+)"),
        lambda m: ("No longer uses" if m["negation"].lower() == "no longer" else "Doesn't use") + f" {m['rest']}",
        "project",
        0.8,
    ),
    _Pattern(
        _en(rf"^we(?:'re|\s+are)?\s+{_ADV}(?:use|using)\s+(?P<rest>.+)"), lambda m: f"Uses {m['rest']}", "project", 0.8
    ),
    _Pattern(
        _en(
            r"^our\s+(?P<rest>(?:project|app|application|service|team|codebase|repo|repository|backend|frontend"
            r"|stack|company|product|api|website|site|database|db|ci|pipeline)\b.+)"
        ),
        lambda m: m["rest"],
        "project",
        0.8,
    ),
    _Pattern(
        _en(
            r"^we(?:'ll|\s+will|'re going to|\s+are going to|\s+plan to|\s+want to|\s+need to|\s+have to|\s+should"
            r"|\s+must)?\s+(?P<rest>.+)"
        ),
        lambda m: m["rest"],
        "project",
        0.7,
        needs_date=True,
    ),
    # Chinese
    _Pattern(
        re.compile(
            f"^(?:请)?(?:一定要|务必)?(?:我们|{_ZH_SUBJECT})?(?P<adv>总是|始终|永远不要|绝对不要|永远不|从不|每次|每当)(?P<rest>.+)"
        ),
        lambda m: m["adv"] + m["rest"],
        "procedure",
        0.8,
    ),
    _Pattern(
        re.compile(f"^{_ZH_SUBJECT}{_ZH_ADV}(?P<verb>不喜欢|讨厌|不爱)(?P<rest>.+)"),
        lambda m: m["verb"] + m["rest"],
        "preference",
        0.85,
    ),
    _Pattern(
        re.compile(f"^{_ZH_SUBJECT}{_ZH_ADV}(?P<verb>更喜欢|最喜欢|喜欢|偏好|偏爱|热爱|爱)(?P<rest>.+)"),
        lambda m: m["verb"] + m["rest"],
        "preference",
        0.85,
    ),
    _Pattern(
        re.compile(f"^{_ZH_SUBJECT}{_ZH_ADV}(?:正在|在)?(?P<verb>使用|用)(?P<rest>.+)"),
        lambda m: m["verb"] + m["rest"],
        "preference",
        0.8,
    ),
    _Pattern(
        re.compile(f"^{_ZH_SUBJECT}{_ZH_ADV}(?:住在|居住在|生活在)(?P<rest>.+)"),
        lambda m: "住在" + m["rest"],
        "profile",
        0.85,
    ),
    _Pattern(
        re.compile(f"^{_ZH_SUBJECT}{_ZH_ADV}在(?P<place>.+?)(?P<verb>工作|上班|任职)(?P<rest>.*)"),
        lambda m: f"在{m['place']}{m['verb']}{m['rest']}",
        "profile",
        0.85,
    ),
    _Pattern(
        re.compile(f"^{_ZH_SUBJECT}(?:叫|名叫|的名字是|的名字叫)(?P<rest>.+)"),
        lambda m: "叫" + m["rest"],
        "profile",
        0.85,
    ),
    _Pattern(
        re.compile(f"^{_ZH_SUBJECT}{_ZH_ADV}(?:今年)?(?P<age>\\d{{1,3}})岁"),
        lambda m: f"{m['age']}岁",
        "profile",
        0.85,
    ),
    _Pattern(
        re.compile(f"^{_ZH_SUBJECT}的(?P<attribute>[^，,。！？]{{1,15}}?)(?:是|叫)(?P<rest>.+)"),
        lambda m: f"{m['attribute']}是{m['rest']}",
        lambda m: _attribute_category(m["attribute"]),
        0.85,
    ),
    _Pattern(
        re.compile(f"^{_ZH_SUBJECT}是(?!说|不是|在|想|觉得)(?:一[个名位])?(?P<rest>.+)"),
        lambda m: "是" + m["rest"],
        "profile",
        0.8,
    ),
    _Pattern(
        re.compile("^(?:我们|我)(?:已经|最终|最后)?(?P<verb>决定|商定|同意|约定|定了)了?(?P<rest>.+)"),
        lambda m: m["verb"] + m["rest"],
        "decision",
        0.85,
    ),
    _Pattern(
        re.compile(f"^我们{_ZH_ADV}(?:已经)?(?P<verb>不再使用|不再用|不用)(?P<rest>.+)"),
        lambda m: m["verb"] + m["rest"],
        "project",
        0.8,
    ),
    _Pattern(
        re.compile(
            f"^我们{_ZH_ADV}(?:正在|要|准备|打算|将|会)?(?P<verb>迁移到|换成|改用|转向|切换到|搬到|换到)了?(?P<rest>.+)"
        ),
        lambda m: m["verb"] + m["rest"],
        "project",
        0.8,
    ),
    _Pattern(
        re.compile(f"^我们{_ZH_ADV}(?:在)?(?P<verb>使用|用|采用)(?P<rest>.+)"),
        lambda m: m["verb"] + m["rest"],
        "project",
        0.8,
    ),
    _Pattern(
        re.compile("^我们的(?P<rest>(?:项目|应用|服务|团队|代码库|仓库|后端|前端|产品|公司|系统|数据库).+)"),
        lambda m: m["rest"],
        "project",
        0.8,
    ),
    _Pattern(
        re.compile("^我们(?:将|会|要|打算|计划|准备)?(?P<rest>.+)"),
        lambda m: m["rest"],
        "project",
        0.7,
        needs_date=True,
    ),
)

# "remember that X" keeps X, as its own statement when it is one, else as said.
_REMEMBER_THAT = re.compile(
    r"^(?:please\s+)?(?:also\s+)?(?:remember|note|keep in mind|don't forget|do not forget)"
    r"(?:\s+(?:that|this)\s*:?\s*|\s*:\s*)"
    r"(?P<rest>.+)"
    r"|^(?:请|麻烦)?(?:你)?(?:记住|记得|记一下)[,:，：]?\s*(?P<zh_rest>.+)",
    re.IGNORECASE,
)
REMEMBER_CONFIDENCE = 0.95
_FIRST_PERSON = (
    (_en(r"^i(?:'m|\s+am)\s+"), "is "),
    (_en(r"^i(?:'ve|\s+have)\s+"), "has "),
    (_en(r"^(?:my|our)\s+"), ""),
    (re.compile("^(?:我的|我们的)"), ""),
    (re.compile("^我(?!们)"), ""),
)
_FIRST_PERSON_VERB = _en(r"^i\s+(?P<verb>[a-z]+)\b")
_ZH_DAY_WORD = "今天|今晚|明天|后天|昨天|前天|(?:下|上|这|本)个?(?:周|星期|礼拜)[一二三四五六日天]?"
_ZH_SUBJECT_THEN_DAY = re.compile(f"^(我们|我)({_ZH_DAY_WORD})[，,]?")  # "我们昨天决定…" reads as "昨天我们决定…"
# "Yesterday we switched to Rust", "昨天我们决定…": the day goes after (English) or stays before (Chinese) the fact.
_LEADING_DAY = re.compile(
    r"^(?P<en>today|tonight|tomorrow|yesterday|(?:next|last|this)\s+(?:week|monday|tuesday|wednesday|thursday|friday"
    r"|saturday|sunday))\s*,?\s+"
    rf"|^(?P<zh>{_ZH_DAY_WORD})[，,]?\s*",
    re.IGNORECASE,
)

# --- relative dates -------------------------------------------------------------------------------------------------

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_ZH_WEEKDAYS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_DAY_OFFSETS = {"today": 0, "tonight": 0, "tomorrow": 1, "yesterday": -1}
_ZH_DAY_OFFSETS = {"今天": 0, "今晚": 0, "明天": 1, "后天": 2, "昨天": -1, "前天": -2}
_PREPOSITION = r"(?:(?P<prep>on|by|until|till|before|after|from|since)\s+)?"
_EN_DAY = _en(rf"\b{_PREPOSITION}(?P<word>today|tonight|tomorrow|yesterday)\b")
_EN_WEEKDAY = _en(rf"\b{_PREPOSITION}(?P<which>next|last|this|coming)\s+(?P<day>{'|'.join(_WEEKDAYS)})\b")
_EN_WEEK = _en(r"\b(?:(?P<prep>in|during|by|until|from)\s+)?(?P<which>next|last|this)\s+week\b")
_ZH_DAY = re.compile("|".join(_ZH_DAY_OFFSETS))
_ZH_WEEKDAY = re.compile("(?P<which>下|上|这|本)个?(?:周|星期|礼拜)(?P<day>[一二三四五六日天])")
_ZH_WEEK = re.compile("(?P<which>下|上|这|本)个?(?:周|星期|礼拜)(?![一二三四五六日天])")
_WEEK_SHIFT = {"next": 1, "last": -1, "this": 0, "下": 1, "上": -1, "这": 0, "本": 0}


def _monday(day: date, weeks: int = 0) -> date:
    return day - timedelta(days=day.weekday()) + timedelta(weeks=weeks)


def _en_weekday(today: date, which: str, weekday: int) -> date:
    """ "next Friday" is Friday of next week, "this Friday" of this week; "last"/"coming" are the nearest ones."""
    if which == "last":
        return today - timedelta(days=(today.weekday() - weekday - 1) % 7 + 1)
    if which == "coming":
        return today + timedelta(days=(weekday - today.weekday() - 1) % 7 + 1)
    return _monday(today, _WEEK_SHIFT[which]) + timedelta(days=weekday)


def _resolve_dates(text: str, today: date) -> str:
    def en_day(match: re.Match[str]) -> str:
        day = today + timedelta(days=_DAY_OFFSETS[match["word"].lower()])
        return f"{(match['prep'] or 'on').lower()} {day.isoformat()}"

    def en_weekday(match: re.Match[str]) -> str:
        day = _en_weekday(today, match["which"].lower(), _WEEKDAYS.index(match["day"].lower()))
        return f"{(match['prep'] or 'on').lower()} {day.isoformat()}"

    def en_week(match: re.Match[str]) -> str:
        monday = _monday(today, _WEEK_SHIFT[match["which"].lower()])
        return f"{(match['prep'] or 'in').lower()} the week of {monday.isoformat()}"

    text = _EN_DAY.sub(en_day, text)
    text = _EN_WEEKDAY.sub(en_weekday, text)
    text = _EN_WEEK.sub(en_week, text)
    text = _ZH_DAY.sub(lambda m: (today + timedelta(days=_ZH_DAY_OFFSETS[m.group()])).isoformat(), text)
    text = _ZH_WEEKDAY.sub(
        lambda m: (_monday(today, _WEEK_SHIFT[m["which"]]) + timedelta(days=_ZH_WEEKDAYS[m["day"]])).isoformat(), text
    )
    return _ZH_WEEK.sub(lambda m: f"{_monday(today, _WEEK_SHIFT[m['which']]).isoformat()}那周", text)


def _names_a_day(text: str) -> bool:
    return any(pattern.search(text) for pattern in (_EN_DAY, _EN_WEEKDAY, _EN_WEEK, _ZH_DAY, _ZH_WEEKDAY, _ZH_WEEK))


# --- extraction -----------------------------------------------------------------------------------------------------


def extract_by_rules(messages: list[dict], *, reference_time: datetime) -> list[ExtractedFact]:
    """Explicit statements the user made in `messages`, in the order said, each once."""
    today = reference_time.date()
    facts: dict[str, ExtractedFact] = {}
    for text in _user_texts(messages):
        if _DO_NOT_REMEMBER.search(text):
            continue
        for clause in _clauses(text):
            fact = _extract_clause(clause, today)
            if fact is not None:
                facts.setdefault(fact.content.casefold(), fact)
    return list(facts.values())


def _user_texts(messages: list[dict]) -> Iterator[str]:
    for message in messages:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):  # OpenAI-style parts: [{"type": "text", "text": ...}, ...]
            content = "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
        if isinstance(content, str) and content.strip():
            yield content


def _clauses(text: str) -> Iterator[str]:
    for line in _FENCED_CODE.sub("\n", text).splitlines():
        if not line.strip() or _CODE_LINE.search(line):
            continue
        line = _LIST_MARKER.sub("", line).replace("`", "").replace("’", "'").replace("‘", "'")
        for sentence in _SENTENCE_END.split(line):
            sentence = sentence.strip()
            if not sentence or len(sentence) > MAX_SENTENCE_CHARS or _is_question(sentence):
                continue
            if _SENSITIVE.search(sentence):
                continue
            yield from (clause.strip() for clause in _CLAUSE_BREAK.split(sentence) if clause and clause.strip())


def _is_question(sentence: str) -> bool:
    return bool(_QUESTION_END.search(sentence) or _QUESTION_START.match(_SMALL_TALK_PREFIX.sub("", sentence)))


def _extract_clause(clause: str, today: date) -> ExtractedFact | None:
    hedged = bool(_HEDGE.search(clause))
    clause = _HEDGE_PREFIX.sub("", _SMALL_TALK_PREFIX.sub("", clause)).strip()
    clause = _TRAILING_SMALL_TALK.sub("", clause)
    clause = _ZH_SUBJECT_THEN_DAY.sub(r"\2\1", clause)
    leading_day = _LEADING_DAY.match(clause)
    if leading_day:
        clause = clause[leading_day.end() :]
    if not clause:
        return None
    remembered = _REMEMBER_THAT.match(clause)
    if remembered:
        inner = remembered["rest"] or remembered["zh_rest"]
        statement = _match_statement(inner)
        content, category = (statement[0], statement[1]) if statement else (_without_first_person(inner), "other")
        confidence = REMEMBER_CONFIDENCE
    else:
        statement = _match_statement(clause, dated=leading_day is not None)
        if statement is None:
            return None
        content, category, confidence = statement
    if hedged:
        confidence = min(confidence, HEDGED_CONFIDENCE)
    if leading_day:
        content = f"{leading_day['zh']}{content}" if leading_day["zh"] else f"{content} {leading_day['en']}"
    content = _tidy(_resolve_dates(content, today))
    return ExtractedFact(content=content, category=category, confidence=confidence) if content else None


def _match_statement(clause: str, *, dated: bool = False) -> tuple[str, str, float] | None:
    """(content, category, confidence) of the first statement pattern the clause opens with."""
    clause = _TRAILING_SMALL_TALK.sub("", clause.strip())
    for pattern in _STATEMENTS:
        match = pattern.regex.match(clause)
        if match is None or (pattern.needs_date and not (dated or _names_a_day(clause))):
            continue
        rest = match.groupdict().get("rest")
        if rest is not None and _VAGUE_OBJECT.match(_TRAILING_SMALL_TALK.sub("", rest)):
            return None
        category = pattern.category if isinstance(pattern.category, str) else pattern.category(match)
        return pattern.build(match), category, pattern.confidence
    return None


def _without_first_person(text: str) -> str:
    """ "I have a meeting on Mondays" -> "has a meeting on Mondays"; "我对花生过敏" -> "对花生过敏"."""
    verb = _FIRST_PERSON_VERB.match(text)
    if verb and verb["verb"].lower() not in ("am", "have"):
        return _third_person(verb["verb"]) + text[verb.end() :]
    for pattern, replacement in _FIRST_PERSON:
        if pattern.match(text):
            return pattern.sub(replacement, text, count=1)
    return text


def _tidy(content: str) -> str:
    content = " ".join(_TRAILING_SMALL_TALK.sub("", content).split())
    return content[:1].upper() + content[1:] if content[:1].isascii() else content
