"""English stemming (Snowball "english"): the word forms the judge and the hash embedder rely on, and the tokens left
alone."""

import itertools
import sys
import threading

import pytest
import snowballstemmer

from core.stemming import stem

STEMS = [
    # the lexicon of the offline judge is keyed on these
    *[(word, "like") for word in ("like", "likes", "liked", "liking")],
    *[(word, "love") for word in ("love", "loves", "loved", "loving")],
    *[(word, "enjoy") for word in ("enjoy", "enjoys", "enjoyed")],
    *[(word, "prefer") for word in ("prefer", "prefers", "preferred", "preferring")],
    *[(word, "ador") for word in ("adore", "adores", "adored")],
    *[(word, "use") for word in ("use", "uses", "used", "using")],
    *[(word, "util") for word in ("utilize", "utilized", "utilizes")],
    *[(word, "utilis") for word in ("utilise", "utilised")],
    *[(word, "live") for word in ("live", "lives", "lived", "living")],
    *[(word, "resid") for word in ("reside", "resides", "residing", "resident")],
    *[(word, "base") for word in ("base", "based")],
    *[(word, "employ") for word in ("employ", "employed", "employer")],
    *[(word, "name") for word in ("name", "names", "named")],
    *[(word, "call") for word in ("call", "called", "calls")],
    ("favorite", "favorit"),
    ("favourite", "favourit"),
    *[(word, "move") for word in ("move", "moved", "moves", "moving")],
    *[(word, "reloc") for word in ("relocate", "relocated", "relocating")],
    *[(word, "migrat") for word in ("migrate", "migrated", "migrating")],
    # what the old suffix stripper got wrong
    ("us", "us"),  # the pronoun, not "use"
    ("have", "have"),
    ("mornings", "morn"),
    ("morning", "morn"),
    ("news", "news"),
    ("one", "one"),
    ("movies", "movi"),
    ("movie", "movi"),
    # words the judge keeps whole rather than stem (see facts.judging.lexicon.UNSTEMMED)
    ("likely", "like"),
    ("useful", "use"),
]


@pytest.mark.parametrize(("word", "expected"), STEMS)
def test_english_word_forms_share_a_stem(word, expected):
    assert stem(word) == expected


@pytest.mark.parametrize(
    "token",
    ["c++", "c#", "node.js", "a@b.com", "o'brien", "gpt-4", "2023", "1990s", "3rd", "k8s", "used_to", "", "Likes",
     "PostgreSQL", "café", "münchen", "naïve", "咖啡", "喜欢", "東京", "москва"],
)  # fmt: skip
def test_tokens_other_than_lowercase_ascii_words_are_left_as_they_are(token):
    assert stem(token) == token


def test_threads_share_the_stemmer_safely():
    """A Snowball stemmer object holds the word it is working on: without the lock, threads garble each other's."""
    endings = ("", "s", "ed", "ing", "ational", "iveness", "fulness")
    words = ["".join(letters) + ending for letters in itertools.product("bcdfg", repeat=3) for ending in endings]
    expected = {word: snowballstemmer.stemmer("english").stemWord(word) for word in words}
    uncached = stem.__wrapped__  # every call reaches the stemmer
    results, errors = [], []

    def stem_all() -> None:
        try:
            results.append({word: uncached(word) for word in words})
        except IndexError as error:  # what a garbled stemmer raises, besides wrong stems
            errors.append(error)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        threads = [threading.Thread(target=stem_all) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)

    assert errors == []
    assert len(results) == 4
    assert all(result == expected for result in results)
