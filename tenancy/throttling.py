"""API throttling: per API key (a burst rate and a sustained rate) and, for failed authentication, per client address.

Counters live in Django's "default" cache (the database cache table, or Redis when REDIS_URL is set), so every web
process counts against the same numbers. Rates are read from the settings at request time (API_THROTTLE_BURST,
API_THROTTLE_RATE, AUTH_FAILURE_THROTTLE_RATE): "N/period", period s, m, h or d with an optional multiple
("300/10s"); an empty rate switches its throttle off.
"""

import ipaddress
import math
import re

from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.base import BaseCache
from rest_framework.throttling import SimpleRateThrottle

_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*(s|sec|second|m|min|minute|h|hour|d|day)s?\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def rate_parse(rate: str | None) -> tuple[int, int] | None:
    """(requests, seconds) of a rate such as "1200/min" or "300/10s"; None when it is empty (no limit)."""
    if rate is None or not str(rate).strip():
        return None
    match = _RATE.match(str(rate))
    if match is None:
        raise ValueError(f"{rate!r} is not a rate such as '1200/min' or '300/10s'.")
    count, multiple, unit = match.groups()
    requests, seconds = int(count), int(multiple or 1) * _UNIT_SECONDS[unit[0]]
    if requests < 1 or seconds < 1:
        raise ValueError(f"{rate!r} allows nothing: give at least one request per period of at least one second.")
    return requests, seconds


class FixedWindowThrottle(SimpleRateThrottle):
    """A SimpleRateThrottle that counts requests in fixed windows: one integer per key and window (an atomic INCR on
    Redis) rather than DRF's list of every request's timestamp, which would grow to 1,200 floats read and written
    back on each request at 1200/min. Refused requests are not counted."""

    rate_setting: str  # the Django setting holding the rate: read per request, so a changed setting takes effect
    cache_alias = "default"

    def get_rate(self):
        return getattr(settings, self.rate_setting, None) or None

    def parse_rate(self, rate):
        return rate_parse(rate) or (None, None)

    @property
    def cache(self):
        return caches[self.cache_alias]

    def allow_request(self, request, view):
        if self.rate is None:
            return True
        key = self.get_cache_key(request, view)
        if key is None:
            return True
        count = self.count(key)
        if count >= self.num_requests:
            return False
        self.record(key, count)
        return True

    def count(self, key: str) -> int:
        return self.cache.get(self._window_key(key), 0)

    def record(self, key: str, count: int | None = None) -> None:
        """Count one request in the current window; `count`, when the caller just read it, spares a lookup."""
        window_key = self._window_key(key)
        timeout = math.ceil(self.retry_in) + 1
        if type(self.cache).incr is BaseCache.incr:
            # The database cache's incr is the base class's get-then-set, which resets the timeout: set directly.
            # Concurrent requests may then count as one, as they do in DRF's own throttles.
            current = self.cache.get(window_key, 0) if count is None else count
            self.cache.set(window_key, current + 1, timeout)
            return
        if not count and self.cache.add(window_key, 1, timeout):  # the window's first request
            return
        try:
            self.cache.incr(window_key)  # atomic where the backend has its own (Redis INCR)
        except ValueError:  # the window's counter expired in between
            self.cache.set(window_key, 1, timeout)

    def wait(self) -> float:
        """Seconds until the current window ends (never 0: the 429 always carries a Retry-After of at least 1)."""
        return max(self.retry_in, 1.0)

    def _window_key(self, key: str) -> str:
        now = self.timer()
        window = int(now // self.duration)
        self.retry_in = (window + 1) * self.duration - now
        return f"{key}:{self.duration}:{window}"


class ApiKeyBurstThrottle(FixedWindowThrottle):
    """Short spikes of one API key (API_THROTTLE_BURST); requests without a key are not counted here."""

    scope = "api_key_burst"
    rate_setting = "API_THROTTLE_BURST"

    def get_cache_key(self, request, view):
        api_key = getattr(request.user, "api_key", None)
        if api_key is None:
            return None
        return self.cache_format % {"scope": self.scope, "ident": api_key.pk}


class ApiKeyRateThrottle(ApiKeyBurstThrottle):
    """The sustained rate of one API key (API_THROTTLE_RATE)."""

    scope = "api_key_sustained"
    rate_setting = "API_THROTTLE_RATE"


class AuthFailureThrottle(FixedWindowThrottle):
    """Failed authentication (a wrong, revoked, malformed or missing key) per client address. Past the rate, every
    request from the address is refused until the window ends, before its key is even looked up."""

    scope = "auth_failure"
    rate_setting = "AUTH_FAILURE_THROTTLE_RATE"

    def get_cache_key(self, request, view=None):
        return self.cache_format % {"scope": self.scope, "ident": address_bucket(self.get_ident(request))}

    def allow_request(self, request, view=None):
        """Whether the address may still try: failures are counted by record_failure, not here."""
        if self.rate is None:
            return True
        return self.count(self.get_cache_key(request)) < self.num_requests

    def record_failure(self, request) -> None:
        if self.rate is not None:
            self.record(self.get_cache_key(request))


def address_bucket(ident: str | None) -> str:
    """The client address a failure counts against: an IPv6 client gets its /64, which is what one host holds."""
    try:
        address = ipaddress.ip_address(ident or "")
    except ValueError:
        return str(ident)
    if address.version == 6:
        if address.ipv4_mapped:
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)
