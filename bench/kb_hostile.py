"""Hostile knowledge-base uploads (tests/kb/hostile_files.py): what the request costs, what the worker's run costs,
and how each ends, with the default limits; beside it the standard library's HTML parser on the same HTML (the
reader before lxml), at sizes it finishes in.

    .venv/bin/python bench/kb_hostile.py [--stdlib-html-kb 25 50 100]

Through the DRF test client against the current database (the embedded one by default), in a throwaway tenant deleted
afterwards; the worker's task runs in this process (its reading runs in the bounded child process, as in
production). Prints figures; asserts nothing.
"""

import argparse
import sys
import time
import uuid
from html.parser import HTMLParser
from pathlib import Path

import _django  # noqa: F401
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django_q.models import OrmQ
from rest_framework.test import APIClient

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kb.services import document_index_queued  # noqa: E402
from tenancy.services import tenant_create  # noqa: E402
from tests.kb.hostile_files import (  # noqa: E402
    markdown_of_headings,
    pdf_with_one_shared_stream,
    repeated_open_tags,
)

FILES = [
    ("tags-400k.html", lambda: repeated_open_tags(400_000)),
    ("tags-5m.html", lambda: repeated_open_tags(5_000_000)),
    ("shared-stream.pdf", pdf_with_one_shared_stream),
    ("headings-24k.md", lambda: markdown_of_headings(24_000)),
]


def stdlib_html_seconds(size_bytes: int) -> float:
    parser = HTMLParser(convert_charrefs=True)
    started = time.perf_counter()
    parser.feed(repeated_open_tags(size_bytes).decode())
    parser.close()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stdlib-html-kb", type=int, nargs="*", default=[25, 50, 100])
    args = parser.parse_args()
    print(
        f"limits: KB_PARSE_TIMEOUT_SECONDS={settings.KB_PARSE_TIMEOUT_SECONDS} "
        f"KB_PARSE_MAX_MEMORY_MB={settings.KB_PARSE_MAX_MEMORY_MB} KB_MAX_PDF_PAGES={settings.KB_MAX_PDF_PAGES} "
        f"KB_MAX_CHUNKS_PER_DOCUMENT={settings.KB_MAX_CHUNKS_PER_DOCUMENT}"
    )
    for size_kb in args.stdlib_html_kb:
        print(f"standard library HTMLParser, {size_kb} KB of '<a': {stdlib_html_seconds(size_kb * 1000):.2f} s")

    tenant, issued = tenant_create(name=f"bench-hostile-{uuid.uuid4().hex[:8]}")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.key}")
    try:
        print(f"{'file':<20} {'bytes':>9} {'request s':>10} {'worker s':>9}  outcome")
        for name, build in FILES:
            content = build()
            queued_before = set(OrmQ.objects.values_list("pk", flat=True))
            started = time.perf_counter()
            upload = {"file": SimpleUploadedFile(name, content)}
            response = client.post("/api/v1/kb/documents", upload, format="multipart")
            requested = time.perf_counter() - started
            OrmQ.objects.exclude(pk__in=queued_before).delete()  # this process runs the task instead
            document_id = response.json()["document"]["id"]
            started = time.perf_counter()
            document_index_queued(document_id=document_id)
            worked = time.perf_counter() - started
            detail = client.get(f"/api/v1/kb/documents/{document_id}").json()
            chunks = f", {len(detail['chunks'])} chunks"
            ended = detail["status"] + (f": {detail['error']}" if detail["error"] else chunks)
            print(f"{name:<20} {len(content):>9,} {requested:>10.2f} {worked:>9.2f}  {response.status_code} -> {ended}")
    finally:
        tenant.delete()


if __name__ == "__main__":
    main()
