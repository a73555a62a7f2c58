"""The searches that supply passages to the context: each takes (tenant, query, vector, keyword_only, limit; no
vector with keyword_only: the query could not be embedded) and returns hits
shaped like kb.selectors.DocumentHit, best first. A new source of documents is one more entry here; callers of
context_build never change."""

from collections.abc import Callable

from kb.selectors import DocumentHit, kb_search

DocumentSource = Callable[..., list[DocumentHit]]

DOCUMENT_SOURCES: tuple[DocumentSource, ...] = (kb_search,)
