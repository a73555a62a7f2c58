"""Text helpers shared by every app: token estimates for budgets and chunk sizes."""

import re

# CJK ideographs, kana and hangul: scripts written without spaces between words.
CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
# A word (captured), or else one CJK character or one symbol (nothing captured): one pass over the text, not three
# (a /context's ten fact lines 212 -> 143 us).
_TOKEN_PIECE = re.compile(f"([^\\W{CJK}]+)|[{CJK}]|[^\\w\\s{CJK}]")


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate of LLM tokens (BPE-style): close enough for budgets, and never zero for text.

    Words average ~1.3 tokens in English BPE vocabularies (a token per 4 characters begun), a CJK character ~1,
    punctuation 1 each.
    """
    if not text:
        return 0
    return max(1, sum([(len(word) + 3) // 4 if word else 1 for word in _TOKEN_PIECE.findall(text)]))


# --- full-text search ----------------------------------------------------------------------------
# PostgreSQL's parsers do not segment CJK text (a whole run becomes one lexeme), so CJK characters are indexed
# one per token and a CJK query run becomes character-pair phrases: n-gram matching without a segmenter.

_CJK_RUN = re.compile(f"[{CJK}]+")
_QUERY_WORD = re.compile(f"[^\\W_{CJK}]+(?:['’][^\\W_{CJK}]+)?")
# English stop words that carry no signal as keywords (PostgreSQL drops its own list too; this saves work).
STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below between
    both but by can could did do does doing down during each few for from further had has have having he her here
    hers herself him himself his how i if in into is it its itself just me more most my myself no nor not now of
    off on once only or other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up very was we were what
    when where which while who whom why will with would you your yours yourself yourselves""".split()
)


def search_text(text: str, *, dates: tuple = ()) -> str:
    """What goes into a row's tsvector: the text with CJK characters spaced apart, plus date words
    ("2023-05-07 7 May 2023") so that "May 2023" finds what happened then."""
    spaced = _CJK_RUN.sub(lambda run: " " + " ".join(run.group()) + " ", text)
    date_words = [f"{day:%Y-%m-%d} {day.day} {day:%B %Y}" for day in dates if day is not None]
    return " ".join([spaced, *date_words])


def query_terms(query: str) -> list[str]:
    """Distinct keyword terms of a query, each searched on its own (OR, weighted by rarity) with
    phraseto_tsquery: words without stop words, and CJK runs as overlapping character pairs ("柏 林")."""
    terms = [word for word in _QUERY_WORD.findall(query.lower()) if word not in STOP_WORDS and len(word) > 1]
    for run in _CJK_RUN.findall(query):
        terms += [" ".join(run[i : i + 2]) for i in range(max(1, len(run) - 1))]
    return list(dict.fromkeys(terms))
