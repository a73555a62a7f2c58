"""The one pagination of every list endpoint: opaque cursors, `?limit=` up to 500, `next`/`previous` links."""

from rest_framework.pagination import CursorPagination
from rest_framework.response import Response


class CursorPage(CursorPagination):
    ordering = "-id"  # newest first; a list may pass another unique ordering
    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 500


def paginated_response(request, view, queryset, serializer_class, *, ordering: str = "-id") -> Response:
    """One page of `queryset` in the order `ordering` (a unique field, e.g. "-id" or "doc_id"), serialized."""
    paginator = CursorPage()
    paginator.ordering = ordering
    page = paginator.paginate_queryset(queryset, request, view=view)
    return paginator.get_paginated_response(serializer_class(page, many=True).data)
