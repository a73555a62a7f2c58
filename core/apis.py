"""What every API view and input serializer shares: nothing the caller sends is silently ignored."""

from collections.abc import Mapping

from django.http import QueryDict
from rest_framework import serializers
from rest_framework.views import APIView

from .pagination import CursorPage
from .replicas import replica_reads_end, replica_reads_start

BODYLESS_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "DELETE"})


class ApiView(APIView):
    """An APIView that refuses query parameters it does not read (GET reads those of its `FilterSerializer`; no
    other method reads any) and a body sent to an operation that takes none (`takes_body = False` for POSTs that
    only act, such as approve)."""

    takes_body = True
    # A POST that only reads (searches, context) may be answered from a replica, as every GET may (core.replicas).
    reads_only = False

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)  # authentication and throttling first: 401 and 429 before 400
        if request.method in ("GET", "HEAD") or self.reads_only:
            # After authentication: a key issued a moment ago is on the primary before it reaches the replica.
            self._replica_token = replica_reads_start()
        reads_query = request.method in ("GET", "HEAD") and hasattr(self, "FilterSerializer")  # HEAD runs get()
        if request.query_params and not reads_query:
            raise serializers.ValidationError({name: ["Unknown query parameter."] for name in request.query_params})
        if (request.method in BODYLESS_METHODS or not self.takes_body) and _has_body(request):
            raise serializers.ValidationError({"non_field_errors": ["This operation takes no request body."]})

    def finalize_response(self, request, response, *args, **kwargs):
        token = getattr(self, "_replica_token", None)
        if token is not None:
            replica_reads_end(token)
            self._replica_token = None
        return super().finalize_response(request, response, *args, **kwargs)


def _has_body(request) -> bool:
    if not int(request.META.get("CONTENT_LENGTH") or 0):
        return False
    return request.data not in ({}, [], None, "")


class BodySerializer(serializers.Serializer):
    """A request body: unknown fields are refused (a typo must not look like success), and text fields take only
    strings (DRF would turn 42 into "42")."""

    def to_internal_value(self, data):
        if isinstance(data, Mapping):
            unknown = [name for name in data if name not in self.fields]
            if unknown:
                raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
            not_text = {
                name: ["Must be a string."] for name, field in self.fields.items() if _not_text(field, data, name)
            }
            if not_text:
                raise serializers.ValidationError(not_text)
        return super().to_internal_value(data)


def _not_text(field, data, name) -> bool:
    if name not in data or isinstance(data, QueryDict):  # query values are always strings
        return False
    value = data[name]
    if isinstance(field, serializers.CharField):
        return value is not None and not isinstance(value, str)
    if isinstance(field, serializers.ListField) and isinstance(field.child, serializers.CharField):
        return isinstance(value, list) and any(not isinstance(item, str) for item in value)
    return False


class QuerySerializer(BodySerializer):
    """Query parameters: each known, and given once."""

    def to_internal_value(self, data):
        if isinstance(data, QueryDict):
            repeated = [name for name, values in data.lists() if len(values) > 1]
            if repeated:
                raise serializers.ValidationError({name: ["Given more than once."] for name in repeated})
        return super().to_internal_value(data)


class PageQuerySerializer(QuerySerializer):
    """The filters of a list, plus its page parameters (read by core.pagination)."""

    PAGE_PARAMETERS = ("limit", "cursor")

    limit = serializers.IntegerField(
        min_value=1,
        max_value=CursorPage.max_page_size,
        required=False,
        help_text=f"Items per page (default {CursorPage.page_size}).",
    )
    cursor = serializers.CharField(required=False, help_text="The `next` or `previous` link's cursor.")

    @property
    def filter_values(self) -> dict:
        """The validated filters without the page parameters, for the selector."""
        return {name: value for name, value in self.validated_data.items() if name not in self.PAGE_PARAMETERS}
