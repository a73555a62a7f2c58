"""Loading knowledge-base files: text, Markdown, rst, HTML, PDF and code, and the errors a user can act on."""

import io
from pathlib import Path

import pytest
from pypdf import PdfReader, PdfWriter

from kb.chunking import chunk_document
from kb.loaders import SUPPORTED_EXTENSIONS, DocumentLoadError, load_bytes, load_document


def minimal_pdf(pages: list[list[str]], *, title: str | None = None) -> bytes:
    """A valid PDF written by hand: one Helvetica text line per string, one page per list."""
    objects = ["<< /Type /Catalog /Pages 2 0 R >>", "", "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    kids = []
    for lines in pages:
        stream = "BT /F1 12 Tf 14 TL 72 720 Td " + " ".join(f"({line}) Tj T*" for line in lines) + " ET"
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream")
        page = "/Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >>"
        objects.append(f"<< {page} /Contents {len(objects)} 0 R >>")
        kids.append(f"{len(objects)} 0 R")
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(kids)}] /Count {len(kids)} >>"
    info = ""
    if title:
        objects.append(f"<< /Title ({title}) >>")
        info = f" /Info {len(objects)} 0 R"
    pdf = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(pdf))
        pdf += f"{number} 0 obj\n{body}\nendobj\n".encode("latin-1")
    xref = len(pdf)
    pdf += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    pdf += "".join(f"{offset:010d} 00000 n \n" for offset in offsets).encode()
    pdf += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R{info} >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(pdf)


def encrypted(pdf: bytes, *, user_password: str) -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf)))
    writer.encrypt(user_password=user_password, owner_password="owner", algorithm="RC4-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


MANUAL = minimal_pdf(
    [["Rate limits", "Each key may send 100 requests per minute."], ["Support", "Write to ops at example.com."]],
    title="Operator manual",
)


def test_a_markdown_file_loads_with_its_first_heading_as_title(tmp_path):
    path = tmp_path / "guide.md"
    path.write_bytes(b"\xef\xbb\xbfIntro line\r\n\r\n# Payments guide\r\n\r\nBody.\r\n")

    document = load_document(path)

    assert document.text == "Intro line\n\n# Payments guide\n\nBody.\n"
    assert (document.content_type, document.title, document.language) == ("markdown", "Payments guide", "")


@pytest.mark.parametrize(
    ("data", "title"),
    [
        pytest.param(b"Payments guide\n==============\n\nBody.\n", "Payments guide", id="setext"),
        pytest.param("---\ntitle: x\n---\n\n支付指南\n----\n".encode(), "支付指南", id="chinese-after-front-matter"),
    ],
)
def test_a_markdown_file_takes_a_setext_title(data, title):
    document = load_bytes(data, filename="guide.md")

    assert (document.content_type, document.title) == ("markdown", title)


def test_a_file_without_extension_is_text_titled_by_its_name(tmp_path):
    path = tmp_path / "README"
    path.write_text("# Not a heading in plain text\n")

    document = load_document(path)

    assert (document.content_type, document.title) == ("text", "README")


def test_an_rst_file_takes_its_first_underlined_title():
    document = load_bytes(b".. comment\n\nUser guide\n==========\n\nText.\n", filename="docs/guide.rst")

    assert (document.content_type, document.title) == ("rst", "User guide")


@pytest.mark.parametrize(
    ("filename", "language"),
    [("service.py", "python"), ("App.TSX", "typescript"), ("main.go", "go"), ("schema.sql", "sql")],
)
def test_source_code_is_code_with_its_language(filename, language):
    document = load_bytes(b"x = 1\n", filename=filename)

    assert (document.content_type, document.language, document.title) == ("code", language, filename)


def test_html_becomes_text_with_markdown_headings():
    html = b"""<!doctype html><html><head><title>Acme &amp; Co docs</title>
<style>body { color: red }</style><script>var secret = "<p>hidden</p>";</script></head>
<body><h1>Welcome</h1><p>Hello&nbsp;world, this is <b>bold</b>
and wraps.</p><noscript>Enable JavaScript</noscript>
<h2>Install <small>v2</small></h2><ul><li>Download</li><li>Run</li></ul>
<pre><code># a shell comment
pip install acme</code></pre>
<p>Line one<br>line two</p></body></html>"""

    document = load_bytes(html, filename="index.html")

    assert document.text == (
        "# Welcome\n\nHello world, this is bold and wraps.\n\n## Install v2\n\n- Download\n- Run\n\n"
        "```\n# a shell comment\npip install acme\n```\n\nLine one\nline two"
    )
    assert (document.content_type, document.title) == ("html", "Acme & Co docs")


def test_html_headings_drive_chunk_heading_paths():
    html = b"<h1>Guide</h1><p>Intro.</p><h2>Limits</h2><p># 100 per minute</p><pre>#!/bin/sh\n</pre>"

    document = load_bytes(html, filename="guide.htm")
    chunks = chunk_document(document.text, content_type=document.content_type)

    assert document.title == "Guide"  # no <title>: the first <h1>
    assert [chunk.heading_path for chunk in chunks] == ["Guide", "Guide > Limits"]
    assert chunks[1].text == "## Limits\n\n\\# 100 per minute\n\n```\n#!/bin/sh\n```"


def test_html_body_text_that_looks_like_markdown_blocks_hides_no_heading():
    html = b"<h1>Guide</h1><p>Results<br>-------</p><p>&lt;script&gt; tags load first.</p><h2>Limits</h2><p>Text.</p>"

    document = load_bytes(html, filename="guide.html")
    chunks = chunk_document(document.text, content_type=document.content_type)

    assert document.text == "# Guide\n\nResults\n-------\n\n<script> tags load first.\n\n## Limits\n\nText."
    assert [chunk.heading_path for chunk in chunks] == ["Guide", "Guide > Limits"]


def test_a_pdf_loads_page_by_page_with_its_metadata_title(tmp_path):
    path = tmp_path / "manual.pdf"
    path.write_bytes(MANUAL)

    document = load_document(path)

    assert document.text == (
        "Rate limits\nEach key may send 100 requests per minute.\n\nSupport\nWrite to ops at example.com."
    )
    assert (document.content_type, document.title) == ("pdf", "Operator manual")


def test_a_pdf_without_metadata_title_is_titled_by_its_file_name():
    document = load_bytes(minimal_pdf([["Hello"]]), filename="scan.pdf")

    assert document.title == "scan.pdf"


def test_a_pdf_restricted_only_by_an_owner_password_still_loads():
    document = load_bytes(encrypted(MANUAL, user_password=""), filename="manual.pdf")

    assert document.text.startswith("Rate limits")


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"%PDF-1.4\nthis is not a PDF body", "broken PDF: "),
        (MANUAL[: len(MANUAL) // 2], "broken PDF: "),
        (minimal_pdf([[]]), "PDF has no extractable text"),
        (encrypted(MANUAL, user_password="secret"), "encrypted PDF"),
    ],
    ids=["garbage", "truncated", "no-text", "encrypted"],
)
def test_an_unreadable_pdf_is_refused_with_a_reason(data, reason):
    with pytest.raises(DocumentLoadError, match="manual.pdf") as raised:
        load_bytes(data, filename="manual.pdf")

    assert raised.value.reason.startswith(reason)


def test_invalid_utf8_names_the_byte_and_its_offset():
    with pytest.raises(DocumentLoadError, match=r"notes\.txt") as raised:
        load_bytes(b"hello world \xff more", filename="notes.txt")

    assert raised.value.reason == "not valid UTF-8 (byte 0xff at offset 12)"


def test_the_offset_of_invalid_utf8_counts_the_bom():
    with pytest.raises(DocumentLoadError) as raised:
        load_bytes(b"\xef\xbb\xbfab\xc3", filename="notes.md")

    assert raised.value.reason == "not valid UTF-8 (byte 0xc3 at offset 5)"


def test_a_binary_file_with_a_text_extension_is_refused():
    with pytest.raises(DocumentLoadError) as raised:
        load_bytes(b"abc\x00def", filename="data.txt")

    assert raised.value.reason == "binary content (NUL byte at offset 3)"


@pytest.mark.parametrize(("filename", "extension"), [("slides.xyz", ".xyz"), ("deck.PPTX", ".pptx"), (".env", ".env")])
def test_an_unsupported_file_type_is_refused_before_reading(tmp_path, filename, extension):
    path = tmp_path / filename  # never created: the type alone decides

    with pytest.raises(DocumentLoadError, match=filename) as raised:
        load_document(path)

    assert raised.value.reason == f"unsupported file type {extension}"


def test_supported_extensions_cover_documents_and_code():
    documents = {".md", ".markdown", ".txt", ".rst", ".html", ".htm", ".pdf"}
    assert documents | {".py", ".tsx", ".go", ".scala"} <= SUPPORTED_EXTENSIONS
    assert ".xyz" not in SUPPORTED_EXTENSIONS


def test_missing_files_and_directories_are_refused_with_a_reason(tmp_path):
    (tmp_path / "notes.md").mkdir()

    with pytest.raises(DocumentLoadError, match="is a directory"):
        load_document(tmp_path / "notes.md")
    with pytest.raises(DocumentLoadError, match="file not found"):
        load_document(tmp_path / "missing.md")


def test_an_unreadable_file_is_refused_as_permission_denied(tmp_path, monkeypatch):
    path = tmp_path / "secret.md"
    path.write_text("# Secret\n")

    # Tests may run as root, which chmod cannot lock out: deny the read the way the OS would.
    def deny(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", deny)

    with pytest.raises(DocumentLoadError, match="secret.md") as raised:
        load_document(path)
    assert raised.value.reason == "permission denied"
