"""The API's JSON parser: refuses, naming the place, what PostgreSQL or Python cannot take further on."""

import codecs
import re

from django.conf import settings
from rest_framework import parsers
from rest_framework.utils import json  # DRF's: refuses NaN and Infinity (strict_constant)

from .errors import ApplicationError

# What PostgreSQL text and jsonb refuse (NUL) and what UTF-8 cannot encode (lone surrogates).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


class JSONParser(parsers.JSONParser):
    """DRF's parser, plus: at most API_MAX_JSON_DEPTH levels of nesting, and no NUL or lone surrogate in any key
    or string. Either answers 400 naming the path (`metadata.tags[2]`), before any view sees the body."""

    def parse(self, stream, media_type=None, parser_context=None):
        encoding = parsers.get_encoding(parser_context or {})
        try:
            data = json.load(codecs.getreader(encoding)(stream), parse_constant=json.strict_constant)
        except RecursionError:
            raise _invalid(f"Nested deeper than {settings.API_MAX_JSON_DEPTH} levels.", "") from None
        except ValueError as exc:
            raise ApplicationError(f"The body is not valid JSON: {exc}", code="parse_error") from None
        json_problem_check(data)
        return data


def json_problem_check(data) -> None:
    """Walk `data` without recursion (a hostile body can nest 10,000 deep) and refuse the first problem."""
    max_depth = settings.API_MAX_JSON_DEPTH
    pending = [(data, "", 1)]
    while pending:
        value, path, depth = pending.pop()
        if isinstance(value, str):
            _string_check(value, path)
        elif isinstance(value, dict | list):
            if depth > max_depth:
                raise _invalid(f"Nested deeper than {max_depth} levels.", path)
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, str):
                    _string_check(key, f"{path}.{key}" if path else key, in_key=True)
                    item_path = f"{path}.{key}" if path else key
                else:
                    item_path = f"{path}[{key}]"
                pending.append((item, item_path, depth + 1))


def _string_check(text: str, path: str, *, in_key: bool = False) -> None:
    if not _UNSTORABLE.search(text):
        return
    where = "a key" if in_key else "text"
    if "\x00" in text:
        raise _invalid(f"NUL characters (\\u0000) cannot be stored; found in {where}.", path)
    raise _invalid(f"A lone surrogate (\\ud800-\\udfff) is not a character; found in {where}.", path)


def _invalid(message: str, path: str) -> ApplicationError:
    """The shape of a serializer's validation error, so that callers read one kind of 400."""
    return ApplicationError(
        f"{path}: {message}" if path else message,
        code="validation_error",
        details={path or "non_field_errors": [message]},
    )
