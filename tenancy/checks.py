"""Startup check: the throttle rates in the settings parse, so a typo fails `manage.py check`, not every request."""

from django.conf import settings
from django.core.checks import Error, register

from .throttling import rate_parse

RATE_SETTINGS = ("API_THROTTLE_BURST", "API_THROTTLE_RATE", "AUTH_FAILURE_THROTTLE_RATE")


@register()
def check_throttle_rates(app_configs=None, **kwargs):
    errors = []
    for name in RATE_SETTINGS:
        try:
            rate_parse(getattr(settings, name, None))
        except ValueError as exc:
            errors.append(Error(f"{name}: {exc}", hint="Leave it empty to switch the limit off.", id="tenancy.E001"))
    return errors
