"""What the offline extractor never mines (code, questions, small talk, secrets, anything the user asked not to
keep), and how a message is cut into sentences and clauses."""

import re
from collections.abc import Iterator

MAX_SENTENCE_CHARS = 300  # longer "sentences" are pasted text, not statements
_FENCED_CODE = re.compile(r"^[ \t]*(```|~~~).*?(?:^[ \t]*\1[^\n]*$|\Z)", re.DOTALL | re.MULTILINE)


# Case-sensitive on purpose: "import x" is code, "Important: ..." is not.
_CODE_LINE = re.compile(
    r"^(?: {4,}|\t)\S"
    r"|^\s*(?:\$ |>>> |#include|def |class |import |from \S+ import |function |const |let |var |return |SELECT |"
    r"INSERT |UPDATE |DELETE |CREATE |ALTER |pip |npm |git |docker |curl |sudo |cd |ls )"
    r"|[{}]\s*$|=>|==|!=|&&|\|\||^\s*[\w.\[\]]+\s*[-+*/]?=\s*\S|^\s*[\w.]+\([^)]*\)\s*;?\s*$"
)


# An instruction not to keep something makes the whole message off limits: the secret is often the next sentence.
DO_NOT_REMEMBER = re.compile(
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
SMALL_TALK_PREFIX = re.compile(
    r"^(?:(?:ok(?:ay)?|thanks|thank you|thx|hi|hello|hey|well|so|also|oh|btw|by the way|and|but|actually|fyi"
    r"|great|cool|sure|yes|yeah|no|nope|anyway|alright)\b[\s,!.:;-]*)+"
    r"|^(?:(?:好的|好吧|好|嗯|谢谢|另外|还有|对了|顺便说一下|顺便说|顺便|哦|噢|其实|所以)[，,\s!！:：]*)+",
    re.IGNORECASE,
)


TRAILING_SMALL_TALK = re.compile(
    r"(?:[,，]?\s*\b(?:thanks|thank you|thx|please|lol|maybe|probably|perhaps|i think|i guess)\b"
    r"|谢谢|吧|呢|啦|哦|啊|了)?[\s.!?;:,。！？；：，~]*$",
    re.IGNORECASE,
)


HEDGE = re.compile(
    r"\b(?:i think|i guess|i believe|i suppose|maybe|perhaps|probably|might|possibly|not sure)\b"
    r"|可能|也许|大概|或许|我觉得|我想|好像",
    re.IGNORECASE,
)


HEDGE_PREFIX = re.compile(
    r"^(?:(?:i think|i guess|i believe|i suppose|maybe|perhaps|probably)(?:\s+that)?[,\s]+)+"
    r"|^(?:(?:我觉得|我想|可能|也许|大概|或许)[，,\s]*)+",
    re.IGNORECASE,
)


# "I love it" says nothing worth keeping without the conversation around it.
VAGUE_OBJECT = re.compile(
    r"^(?:it|this|that|them|these|those|you|this one|that one|that idea|the idea)"
    r"(?:\s+(?:a lot|so much|very much|too|as well))?$|^(?:这个|那个|它|你|这|那|这样|那样)$",
    re.IGNORECASE,
)


_LIST_MARKER = re.compile(r"^\s*(?:[-*•>]|\d+[.)])\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；])|\n")


_CLAUSE_BREAK = re.compile(
    r"\s*(?:,\s*|\s+)(?:and|but|also)\s+(?=(?:i|i'm|we|we're|my|our)\b)|[，,]\s*(?:而且|但是|并且|但|而|还有)?(?=我)",
    re.IGNORECASE,
)


def user_texts(messages: list[dict]) -> Iterator[tuple[int, str]]:
    """(position, text) of every message of the user with some text."""
    for position, message in enumerate(messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):  # OpenAI-style parts: [{"type": "text", "text": ...}, ...]
            content = "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
        if isinstance(content, str) and content.strip():
            yield position, content


def clauses(text: str) -> Iterator[str]:
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
    return bool(_QUESTION_END.search(sentence) or _QUESTION_START.match(SMALL_TALK_PREFIX.sub("", sentence)))
