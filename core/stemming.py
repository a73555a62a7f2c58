"""English stemming for the offline fact judge and the hashing embedder: Snowball's "english" stemmer (Porter2), so
"use", "uses", "used" and "using" share the stem "use" while the pronoun "us" keeps its own."""

import functools
import threading

import snowballstemmer

_ENGLISH = snowballstemmer.stemmer("english")
_LOCK = threading.Lock()  # a Snowball stemmer keeps the word it works on in the object: one word at a time


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The stem of a lowercase English word ("likes" -> "like", "relocated" -> "reloc"). Anything else is returned as
    it is: a word with capitals, digits, signs or letters beyond ASCII ("Python", "c++", "node.js", "2023", "café",
    "咖啡"). Cached: it is called for every word of every text, and words repeat."""
    if not (word.isascii() and word.isalpha() and word.islower()):
        return word
    with _LOCK:
        return _ENGLISH.stemWord(word)
