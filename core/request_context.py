"""What every log line of a request carries: its request id, the tenant once its API key is known, and the route.

Context variables, so that any code running for the request (a service deep down) logs them without being passed
anything; code outside a request (a django-q task, a command) has none.
"""

import re
import uuid
from contextvars import ContextVar

from django.conf import settings

request_id_var: ContextVar[str | None] = ContextVar("request_id", default=None)
tenant_id_var: ContextVar[int | None] = ContextVar("tenant_id", default=None)
route_var: ContextVar[str | None] = ContextVar("route", default=None)

# A client's X-Request-ID is kept only when it is short and plain: it ends up in every log line and header.
_REQUEST_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")
UNMATCHED_ROUTE = "(unmatched)"  # one label for every path no URL pattern matched (their paths are not logged)
STATIC_ROUTE = "(static)"  # files served before URL resolution (WhiteNoise)


def request_id_from(header: str | None) -> str:
    """The client's X-Request-ID when it is 1-64 characters of letters, digits and . _ : -, else a new one."""
    if header and _REQUEST_ID.match(header):
        return header
    return uuid.uuid4().hex


def tenant_id_set(tenant_id: int) -> None:
    """Called once the request's API key is known; the request-id middleware resets it when the request ends."""
    tenant_id_var.set(tenant_id)


def route_of(request) -> str:
    """The URL pattern the request matched ("/api/v1/facts/<int:fact_id>"), never the path with its ids."""
    match = getattr(request, "resolver_match", None)
    if match is None or match.route is None:
        static = "/" + settings.STATIC_URL.lstrip("/")
        return STATIC_ROUTE if request.path.startswith(static) else UNMATCHED_ROUTE
    return "/" + match.route.lstrip("^").rstrip("$")
