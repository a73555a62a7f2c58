"""Keyword scoring, shared by every search: BM25 over a stored tsvector, each query term counted once.

A row matching a term adds the term's IDF, ln(1 + (N - df + 0.5) / (df + 0.5)), so a word in every row weighs
nothing and a rare name or code a lot; the sum is scaled by BM25's length normalisation, (k1 + 1) / (1 + k1 * (1 - b
+ b * length / average length)), which b = 0 switches off. A search says over which rows N and the document
frequencies are counted (one user's facts or episodes, a tenant's chunks) and takes k1 and b from its own settings.

The terms (core.text.query_terms) are constants in the statement, one boolean match column each: the planner can
use a GIN index for "any term", and every per-term sum is plain float8 arithmetic (an array of terms joined per row
measured 3x slower on 10k facts).
"""

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .text import query_terms

MAX_QUERY_TERMS = 32  # a longer query keeps its first 32 distinct terms on the keyword side


def idf(rows: int, document_frequency: int) -> float:
    """A term's IDF in Python, as KeywordQuery.idf_columns computes it in SQL (for plans made before the statement)."""
    return math.log(1 + (rows - document_frequency + 0.5) / (document_frequency + 0.5))


@dataclass(frozen=True)
class Bm25:
    k1: float = 1.2
    b: float = 0.75  # 0 = no length normalisation

    def length_factor(self, length: str, average_length: str) -> str:
        """The SQL factor a row's summed IDF is multiplied by ("1" when b is 0: every row alike)."""
        if not self.b:
            return "1::float8"
        k1, b = float(self.k1), float(self.b)
        norm = f"(1 - {b}::float8 + {b}::float8 * {length} / {average_length})"
        return f"({k1 + 1}::float8 / (1 + {k1}::float8 * {norm}))"


class KeywordQuery:
    """The keyword side of one search: the query's terms, and the SQL pieces that match and score them."""

    def __init__(self, query: str):
        self.terms = query_terms(query)[:MAX_QUERY_TERMS]

    def __len__(self) -> int:
        return len(self.terms)

    @property
    def params(self) -> dict[str, str]:
        """The statement's parameters for the terms (%(term0)s, %(term1)s, ...)."""
        return {f"term{n}": term for n, term in enumerate(self.terms)}

    def term(self, n: int) -> str:
        return f"phraseto_tsquery('english', %(term{n})s)"

    def any_term(self, terms: Iterable[int] | None = None) -> str:
        """A tsquery matching rows with any of the terms (of `terms`, their numbers, when given; NULL without terms:
        `@@ NULL` is never true)."""
        numbers = range(len(self)) if terms is None else terms
        return "(" + (" || ".join(self.term(n) for n in numbers) or "NULL::tsquery") + ")"

    def pattern(self, inside: Iterable[int], outside: Iterable[int]) -> str:
        """A tsquery matching rows with every term of `inside` and none of `outside` (term numbers)."""
        required = " && ".join(self.term(n) for n in inside)
        excluded = self.any_term(outside)
        return f"({required} && !!{excluded})" if excluded != self.any_term([]) else f"({required})"

    def match_columns(self, column: str) -> str:
        """Select-list entries `, <column> @@ <term n> AS m<n>` (nothing without terms)."""
        return "".join(f", {column} @@ {self.term(n)} AS m{n}" for n in range(len(self)))

    def match_names(self, alias: str = "") -> list[str]:
        prefix = f"{alias}." if alias else ""
        return [f"{prefix}m{n}" for n in range(len(self))]

    def matched_count(self, alias: str = "") -> str:
        """How many distinct terms a row matches."""
        return "(" + (" + ".join(f"{name}::int" for name in self.match_names(alias)) or "0") + ")"

    def idf_columns(self, rows: str, document_frequency: Callable[[str], str]) -> str:
        """`idf<n>` columns of an aggregate over matched rows: `rows` is N, `document_frequency(match)` the SQL
        counting the rows where `match` (a match column) is true. One column "idf_none" without terms."""
        if not len(self):
            return "max(0)::float8 AS idf_none"  # an aggregate all the same: one row
        return ", ".join(
            f"ln(1 + ({rows} - {document_frequency(f'm{n}')} + 0.5) / ({document_frequency(f'm{n}')} + 0.5))::float8"
            f" AS idf{n}"
            for n in range(len(self))
        )

    def idf_sum(self, alias: str = "") -> str:
        """The summed IDF of the terms a row matches (`alias` names the row holding the match columns)."""
        return _summed_idf(self.match_names(alias))

    def idf_sum_matching(self, column: str) -> str:
        """The summed IDF of the terms the tsvector `column` matches (for rows read without match columns)."""
        return _summed_idf(f"{column} @@ {self.term(n)}" for n in range(len(self)))

    def score(self, bm25: Bm25, *, alias: str = "", length: str = "", average_length: str = "") -> str:
        """A row's BM25 score: its summed IDF times the length factor (length SQL only needed when b > 0)."""
        if not bm25.b:
            return self.idf_sum(alias)
        return f"({self.idf_sum(alias)} * {bm25.length_factor(length, average_length)})"


def _summed_idf(matches: Iterable[str]) -> str:
    """The sum of idf<n> over the terms whose match condition (the n-th of `matches`) holds."""
    cases = [f"CASE WHEN {match} THEN idf{n} ELSE 0::float8 END" for n, match in enumerate(matches)]
    return "(" + " + ".join(cases) + ")" if cases else "0::float8"


def scored_rows(*, keywords: KeywordQuery, bm25: Bm25, table: str, where: str, vector_score: str) -> str:
    """The CTEs of a hybrid search over the rows of `table` matching `where`, all of them scored (an exact scan):
    base (id, vector_score, the match columns), patterns (rows grouped by the terms they match: few groups, so
    document frequencies and the best keyword score cost little), idf, and top (the best keyword score, which
    scales keyword scores to 0-1). N and the document frequencies count the same rows. Select from
    `base CROSS JOIN idf CROSS JOIN top` with keyword_score() after them."""
    names = keywords.match_names()
    lengths = bool(bm25.b)
    if lengths:  # the best score depends on each row's length: it is found among the rows
        top_score, top_rows = keyword_bm25(keywords, bm25), "base"
    else:  # rows matching the same terms score the same: the best is found among the groups
        top_score, top_rows = keywords.idf_sum("patterns"), "patterns"
    average_length = ", greatest(sum(lengths) / greatest(sum(rows), 1), 1)::float8 AS average_length"
    return f"""
base AS MATERIALIZED (
    SELECT id, {vector_score} AS vector_score{keywords.match_columns("search_vector")}\
{", length(search_vector) AS len" if lengths else ""}
    FROM {table}
    WHERE {where}
),
patterns AS MATERIALIZED (
    SELECT {"".join(f"{name}, " for name in names)}count(*) AS rows{", sum(len) AS lengths" if lengths else ""}
    FROM base{" GROUP BY " + ", ".join(names) if names else ""}
),
idf AS MATERIALIZED (
    SELECT {keywords.idf_columns("sum(rows)", lambda match: f"coalesce(sum(rows) FILTER (WHERE {match}), 0)")}\
{average_length if lengths else ""}
    FROM patterns
),
top AS MATERIALIZED (
    SELECT greatest(max({top_score}), 1e-9) AS score FROM {top_rows} CROSS JOIN idf
)"""


def keyword_bm25(keywords: KeywordQuery, bm25: Bm25) -> str:
    """A base row's BM25 score (the CTEs of scored_rows in scope)."""
    return keywords.score(bm25, alias="base", length="base.len", average_length="idf.average_length")


def keyword_score(keywords: KeywordQuery, bm25: Bm25) -> str:
    """A base row's keyword score from 0 to 1: its BM25 over the best row's."""
    return f"{keyword_bm25(keywords, bm25)} / top.score"
