"""The one timestamp reader: what callers send, what the service stores."""

from datetime import UTC, datetime, timedelta, timezone

import pytest
from django.core.exceptions import ValidationError

from core.timestamps import parse_timestamp, timestamp_text


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2024-05-01T14:30:00Z", datetime(2024, 5, 1, 14, 30, tzinfo=UTC)),
        ("2024-05-01T16:30:00+02:00", datetime(2024, 5, 1, 14, 30, tzinfo=UTC)),
        ("2024-05-01T14:30:00", datetime(2024, 5, 1, 14, 30, tzinfo=UTC)),  # no zone: UTC
        ("2024-05-01 14:30", datetime(2024, 5, 1, 14, 30, tzinfo=UTC)),
        (datetime(2024, 5, 1, 14, 30), datetime(2024, 5, 1, 14, 30, tzinfo=UTC)),  # noqa: DTZ001 - naive on purpose
        (None, None),
        ("", None),
    ],
)
def test_iso_timestamps_become_aware_datetimes(value, expected):
    assert parse_timestamp(value, field="occurred_at") == expected


@pytest.mark.parametrize("value", ["yesterday", "2024-13-01T00:00:00Z", "0000-01-01T00:00:00Z", 1714573800, [], "2024"])
def test_anything_else_is_a_validation_error_naming_the_field(value):
    with pytest.raises(ValidationError) as error:
        parse_timestamp(value, field="messages[2].timestamp")
    assert list(error.value.message_dict) == ["messages[2].timestamp"]


def test_stored_text_is_utc_with_a_z_and_reads_back_the_same():
    moment = datetime(2024, 5, 1, 16, 30, tzinfo=timezone(timedelta(hours=2)))
    assert timestamp_text(moment) == "2024-05-01T14:30:00Z"
    assert parse_timestamp(timestamp_text(moment), field="timestamp") == moment
