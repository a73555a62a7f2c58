"""Log formats (LOG_FORMAT): one JSON object per line, or plain text, both carrying the request's context.

What goes into a line is a closed list of fields: a log call's `extra` cannot smuggle a request (or its body) in.
Memory text (fact content, messages, queries) must never be logged: a log message names ids and counts.
"""

import json
import logging
from datetime import UTC, datetime

from .request_context import UNMATCHED_ROUTE, request_id_var, route_of, route_var, tenant_id_var

# Fields a log call may add with `extra=` (the access line's), in the order they are written.
EXTRA_FIELDS = ("method", "status", "latency_ms")


class RequestContextFilter(logging.Filter):
    """Puts the request id, tenant id and route on every record; and Django's "Not Found: /path" lines name the
    route instead of the path (a path holds user ids)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id_var.get()
        record.tenant_id = tenant_id_var.get()
        record.route = getattr(record, "route", None) or route_var.get()
        request = getattr(record, "request", None)
        if record.name == "django.request" and request is not None and isinstance(record.args, tuple):
            if len(record.args) == 2:  # django.utils.log.log_response: "%s: %s" % (reason, request.path)
                record.args = (record.args[0], route_of(request))
            record.route = record.route or route_of(request)
            record.status = getattr(record, "status", None) or getattr(record, "status_code", None)
            record.method = getattr(record, "method", None) or request.method
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", None),
            "tenant_id": getattr(record, "tenant_id", None),
            "route": getattr(record, "route", None),
        }
        for name in EXTRA_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False, default=str)


class PlainFormatter(logging.Formatter):
    """`time level logger [request id tenant]: message`, for a terminal."""

    def __init__(self):
        super().__init__("%(asctime)s %(levelname)s %(name)s%(context)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        request_id = getattr(record, "request_id", None)
        tenant_id = getattr(record, "tenant_id", None)
        record.context = f" [{request_id}{f' tenant {tenant_id}' if tenant_id else ''}]" if request_id else ""
        return super().format(record)


__all__ = ["JsonFormatter", "PlainFormatter", "RequestContextFilter", "UNMATCHED_ROUTE"]
