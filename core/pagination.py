"""The one pagination of every list endpoint: opaque cursors, `?limit=` up to 500, `next`/`previous` links."""

from drf_spectacular.utils import inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.pagination import CursorPagination
from rest_framework.response import Response


class CursorPage(CursorPagination):
    ordering = "-id"  # newest first; a list may pass another unique ordering
    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 500

    def decode_cursor(self, request):
        try:
            return super().decode_cursor(request)
        except NotFound:  # DRF answers 404 for a cursor it cannot read; it is the caller's parameter that is wrong
            raise serializers.ValidationError({"cursor": ["Invalid cursor."]}) from None


def paginated_response(request, view, queryset, serializer_class, *, ordering: str = "-id") -> Response:
    """One page of `queryset` in the order `ordering` (a unique field, e.g. "-id" or "doc_id"), serialized."""
    paginator = CursorPage()
    paginator.ordering = ordering
    page = paginator.paginate_queryset(queryset, request, view=view)
    return paginator.get_paginated_response(serializer_class(page, many=True).data)


def page_schema(serializer_class, name: str):
    """The schema of one page of `serializer_class` items, as paginated_response answers it."""
    return inline_serializer(
        name=f"{name}Page",
        fields={
            "next": serializers.URLField(allow_null=True, help_text="The next page, or null on the last."),
            "previous": serializers.URLField(allow_null=True, help_text="The previous page, or null on the first."),
            "results": serializer_class(many=True),
        },
    )
