"""The one reader of timestamps that callers send (ISO 8601) and that the service stores as text."""

from datetime import UTC, datetime

from django.core.exceptions import ValidationError
from django.utils.dateparse import parse_datetime

TIMESTAMP_MESSAGE = "Must be an ISO 8601 date and time, e.g. 2024-05-01T14:30:00Z."
# The moments a caller may name: far enough inside datetime's years 1-9999 that the service's own arithmetic
# (retention windows, validity, decay) cannot step outside them.
EARLIEST = datetime(1000, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)
RANGE_MESSAGE = "Must be between the years 1000 and 9000."


def parse_timestamp(value, *, field: str) -> datetime | None:
    """`value` (ISO 8601 text, or a datetime) as an aware datetime, UTC when it names no zone; None for None or "".
    Anything else, an impossible date included ("2024-13-01"), is a ValidationError naming `field`."""
    if value is None or value == "":
        return None
    parsed = value if isinstance(value, datetime) else None
    if isinstance(value, str):
        try:
            parsed = parse_datetime(value)
        except ValueError:  # well formed but impossible: month 13, year 0
            parsed = None
    if parsed is None:
        raise ValidationError({field: TIMESTAMP_MESSAGE})
    parsed = parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed
    if not in_range(parsed):
        raise ValidationError({field: RANGE_MESSAGE})
    return parsed


def in_range(moment: datetime) -> bool:
    """Is an aware `moment` between EARLIEST and LATEST (compared without converting, which could overflow)?"""
    return EARLIEST <= moment <= LATEST


def timestamp_text(value: datetime) -> str:
    """How the service writes a time into JSON it stores: UTC, with a "Z", as the API writes every other time."""
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
