"""Everything under /api/ (and the Mem0-compatible /mem0/) answers in the API's error shape, whatever went wrong and
wherever (DEBUG on or off)."""

import logging
import time
from http import HTTPStatus

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import JsonResponse

from .api_errors import error_body
from .db import is_database_unavailable
from .metrics import request_observe
from .request_context import request_id_from, request_id_var, route_of, route_var, tenant_id_var

logger = logging.getLogger("django.request")
access_logger = logging.getLogger("access")
# Probes and scrapes come every few seconds: their access lines are DEBUG, out of the way at LOG_LEVEL=INFO.
QUIET_ROUTES = frozenset({"/api/health/live", "/api/health/ready", "/metrics"})

API_PREFIXES = ("/api/", "/mem0/")
# A status Django or a library answered with HTML, and the code the API's shape gives it.
STATUS_CODES = {
    400: "bad_request",
    401: "not_authenticated",
    403: "permission_denied",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "throttled",
    500: "server_error",
    503: "unavailable",
}


def api_error_response(status: int, message: str, *, code: str | None = None, details: dict | None = None):
    code = code or STATUS_CODES.get(status, "error")
    return JsonResponse(error_body(code, message, details), status=status)


class RequestContextMiddleware:
    """The outermost middleware. Gives the request its id (the client's X-Request-ID when it is short and plain,
    else a new one), returned in X-Request-ID on every response and carried by every log line of the request; writes
    one access line per request and its latency metric: route (the URL pattern, never the path or query), method,
    status, latency."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request_id = request_id_from(request.headers.get("X-Request-ID"))
        request.request_id = request_id
        # Set (and reset below) all three, so that nothing of a previous request on this thread leaks into this one.
        tokens = [
            (var, var.set(value))
            for var, value in [(request_id_var, request_id), (tenant_id_var, None), (route_var, None)]
        ]
        started = time.perf_counter()
        try:
            response = self.get_response(request)
            response["X-Request-ID"] = request_id
            seconds = time.perf_counter() - started
            route, latency_ms = route_of(request), round(seconds * 1000, 2)
            request_observe(route=route, method=request.method, status=response.status_code, seconds=seconds)
            access_logger.log(
                logging.DEBUG if route in QUIET_ROUTES else logging.INFO,
                "%s %s %s %.1f ms",
                request.method,
                route,
                response.status_code,
                latency_ms,
                extra={
                    "route": route,
                    "method": request.method,
                    "status": response.status_code,
                    "latency_ms": latency_ms,
                },
            )
            return response
        finally:
            for var, token in reversed(tokens):
                var.reset(token)

    def process_view(self, request, view_func, view_args, view_kwargs):
        route_var.set(route_of(request))  # from here on, every log line of the request names its route


class ApiErrorMiddleware:
    """Refuses oversized bodies before they are read (413), turns any exception a view did not handle into a JSON
    500 (logged with its traceback, never shown), and rewrites HTML error pages (Django's 404 with its URL list,
    400 for a bad Host) into the error shape."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if not request.path.startswith(API_PREFIXES):
            return self.get_response(request)
        too_big = _oversized_body(request)
        if too_big is not None:
            return too_big
        response = self.get_response(request)
        if response.status_code >= 400 and not response.get("Content-Type", "").startswith("application/json"):
            return _as_api_error(response)
        return response

    def process_exception(self, request, exception):
        if not request.path.startswith(API_PREFIXES):
            return None
        if isinstance(exception, RequestDataTooBig):
            return _payload_too_large(settings.API_MAX_BODY_BYTES)
        if is_database_unavailable(exception):
            logger.warning("Database unavailable on %s %s: %s", request.method, route_of(request), exception)
            response = api_error_response(
                503, "The database cannot be reached right now; retry shortly.", code="database_unavailable"
            )
            response["Retry-After"] = "1"
            return response
        logger.error("Unhandled error on %s %s", request.method, route_of(request), exc_info=exception)
        return api_error_response(500, "The server failed to answer this request; the error is logged.")


def _oversized_body(request):
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return api_error_response(400, "The Content-Length header is not a number.")
    if length > settings.API_MAX_BODY_BYTES:
        return _payload_too_large(settings.API_MAX_BODY_BYTES, length)
    return None


def _payload_too_large(limit: int, length: int | None = None):
    size = f"The request body is {length:,} bytes; " if length else "The request body is too large; "
    return api_error_response(
        413,
        f"{size}the API takes at most {limit:,} (API_MAX_BODY_BYTES).",
        details={"max_bytes": limit, **({"size_bytes": length} if length else {})},
    )


def _as_api_error(response):
    status = response.status_code
    phrase = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Error"
    messages = {404: "No such resource or route.", 500: "The server failed to answer this request."}
    rewritten = api_error_response(status, messages.get(status, f"{phrase}."))
    for header in ("Allow", "Retry-After", "WWW-Authenticate"):
        if header in response:
            rewritten[header] = response[header]
    return rewritten
