"""Sign-in to the admin, throttled: after ADMIN_LOGIN_MAX_FAILURES wrong passwords for one user from one address
within ADMIN_LOGIN_LOCK_SECONDS, that user is locked out from that address until the window ends (the right password
included), and an address failing for four times as many attempts across users is locked out whatever the user.
Counters live in the default cache, shared by every process."""

import math
import time

from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.core.cache import cache
from django.core.exceptions import ValidationError

from tenancy.throttling import AuthFailureThrottle, address_bucket

ADDRESS_FACTOR = 4  # failures of one address across users, in multiples of ADMIN_LOGIN_MAX_FAILURES


class ThrottledAdminLoginForm(AdminAuthenticationForm):
    error_messages = {
        **AdminAuthenticationForm.error_messages,
        "locked": "Too many failed sign-ins from your address. Try again in %(minutes)s minute%(plural)s, or ask an "
        "administrator to reset your password.",
    }

    def clean(self):
        counters = _counters(self.request, self.cleaned_data.get("username") or "")
        waits = [_wait(key) for key, limit in counters if _failures(key) >= limit]
        if waits:
            minutes = max(1, math.ceil(max(waits) / 60))
            raise ValidationError(
                self.error_messages["locked"], code="locked", params={"minutes": minutes, "plural": "s" * (minutes > 1)}
            )
        try:
            cleaned = super().clean()
        except ValidationError:
            for key, _ in counters:
                _count_failure(key)
            raise
        cache.delete(counters[0][0])  # the user signed in: their own count starts again
        return cleaned


def _counters(request, username: str) -> list[tuple[str, int]]:
    address = address_bucket(AuthFailureThrottle().get_ident(request))
    limit = settings.ADMIN_LOGIN_MAX_FAILURES
    return [
        (f"admin-login:{address}:{username.strip().lower()}", limit),
        (f"admin-login:{address}", limit * ADDRESS_FACTOR),
    ]


def _failures(key: str) -> int:
    return (cache.get(key) or {"count": 0})["count"]


def _wait(key: str) -> float:
    entry = cache.get(key) or {"until": 0}
    return max(entry["until"] - time.time(), 0)


def _count_failure(key: str) -> None:
    # A read and a write: concurrent failures may count as one, as in DRF's own throttles.
    entry = cache.get(key)
    if entry is None or entry["until"] <= time.time():
        entry = {"count": 0, "until": time.time() + settings.ADMIN_LOGIN_LOCK_SECONDS}
    entry["count"] += 1
    cache.set(key, entry, timeout=max(1, math.ceil(entry["until"] - time.time())))
