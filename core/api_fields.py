"""Serializer fields shared by the APIs of every app."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from .timestamps import RANGE_MESSAGE, in_range
from .validation import DOC_ID_MESSAGE, DOC_ID_PATTERN, IDENTIFIER_MESSAGE, IDENTIFIER_PATTERN


class IdentifierField(serializers.RegexField):
    """A user or session id (see core.validation)."""

    def __init__(self, **kwargs):
        super().__init__(IDENTIFIER_PATTERN, error_messages={"invalid": IDENTIFIER_MESSAGE}, **kwargs)


class DocIdField(serializers.RegexField):
    def __init__(self, **kwargs):
        super().__init__(DOC_ID_PATTERN, error_messages={"invalid": DOC_ID_MESSAGE}, **kwargs)


@extend_schema_field(OpenApiTypes.STR)
class CommaSeparatedChoicesField(serializers.Field):
    """`?status=active,pending` -> ["active", "pending"], each checked against the choices."""

    def __init__(self, choices, **kwargs):
        self.choices = list(choices)
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        values = [value.strip() for value in str(data).split(",") if value.strip()]
        unknown = [value for value in values if value not in self.choices]
        if unknown:
            raise serializers.ValidationError(f"Unknown value(s) {unknown}; choose from {self.choices}.")
        return values

    def to_representation(self, value):
        return ",".join(value)


class TimestampField(serializers.DateTimeField):
    """An input moment (ISO 8601) within core.timestamps' range: year 0001 or 9999 would overflow date arithmetic."""

    default_error_messages = {"overflow": RANGE_MESSAGE}  # DRF's own words for a moment it cannot convert to UTC

    def to_internal_value(self, value):
        moment = super().to_internal_value(value)
        if not in_range(moment):
            raise serializers.ValidationError(RANGE_MESSAGE)
        return moment


class DegradedField(serializers.ListField):
    """A search answer's "degraded": what it did without (["embeddings"]: the query could not be embedded, so it
    ranked by keywords alone); empty when nothing was missing."""

    def __init__(self, **kwargs):
        kwargs.setdefault(
            "help_text",
            'What this answer did without: "embeddings" when the query could not be embedded (the embedding '
            "provider is failing) and results are ranked by keywords alone. Empty when nothing is degraded.",
        )
        super().__init__(child=serializers.CharField(), read_only=True, **kwargs)
