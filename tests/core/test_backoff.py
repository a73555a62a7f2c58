from datetime import timedelta

import pytest

from core.backoff import retry_delay


@pytest.mark.parametrize(
    ("failures", "cap", "seconds"),
    [(0, None, 60), (1, None, 60), (2, None, 120), (4, None, 480), (4, 300, 300), (10**6, 3600, 3600)],
)
def test_the_wait_doubles_with_each_failure_up_to_the_cap(failures, cap, seconds):
    assert retry_delay(failures, base_seconds=60, max_seconds=cap) == timedelta(seconds=seconds)
