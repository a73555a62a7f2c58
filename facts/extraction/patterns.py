"""The shape of a statement pattern, and the pieces the English and Chinese patterns share."""

import re
from collections.abc import Callable
from dataclasses import dataclass

ADV = (
    r"(?:(?:really|also|usually|generally|mostly|definitely|strongly|actually|still|now|currently|just|totally"
    r"|absolutely|much|kind of|sort of|probably|maybe|personally|very)\s+)*"
)


ZH_ADV = "(?:也|还|一直|都|比较|非常|很|特别|真的|现在|目前|平时|通常|一般|其实|确实|个人|可能|也许|大概|或许)*"
ZH_SUBJECT = "我(?!们)"


@dataclass(frozen=True)
class Pattern:
    regex: re.Pattern[str]
    build: Callable[[re.Match[str]], str]  # the fact's content, from the match
    category: str | Callable[[re.Match[str]], str]
    confidence: float
    needs_date: bool = False  # only a statement when it names a day: "we release next Friday"


def en(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


def third_person(verb: str) -> str:
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


def attribute_category(attribute: str) -> str:
    if re.search(r"favou?rite|preferred|最喜欢|最爱|偏好", attribute, re.IGNORECASE):
        return "preference"
    if re.search(r"project|app|repo|team|stack|codebase|service|deadline|release|项目|仓库|团队|系统", attribute, re.I):
        return "project"
    return "profile"
