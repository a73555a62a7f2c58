"""Text helpers shared by every app: token estimates for budgets and chunk sizes."""

import math
import re

# CJK ideographs, kana and hangul: scripts written without spaces between words.
CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK_CHAR = re.compile(f"[{CJK}]")
_WORD = re.compile(f"[^\\W{CJK}]+")
_SYMBOL = re.compile(f"[^\\w\\s{CJK}]")


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate of LLM tokens (BPE-style): close enough for budgets, and never zero for text.

    Words average ~1.3 tokens in English BPE vocabularies, a CJK character ~1, punctuation 1 each.
    """
    if not text:
        return 0
    words = _WORD.findall(text)
    word_tokens = sum(max(1, math.ceil(len(word) / 4)) for word in words)
    return max(1, word_tokens + len(_CJK_CHAR.findall(text)) + len(_SYMBOL.findall(text)))
