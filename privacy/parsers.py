"""Bodies the import reads itself: JSON Lines (and a JSON document) are handed over as bytes, so that a problem is
reported by its line, which a whole-body JSON parser could not do."""

from rest_framework.parsers import BaseParser


class JsonLinesParser(BaseParser):
    media_type = "application/x-ndjson"

    def parse(self, stream, media_type=None, parser_context=None) -> bytes:
        return stream.read() if stream is not None else b""


class JsonlParser(JsonLinesParser):
    media_type = "application/jsonl"


class JsonDocumentParser(JsonLinesParser):
    """A JSON document (a list of records, or Mem0's {"results": [...]}), read by privacy.imports too."""

    media_type = "application/json"
