"""Files built to hold a parser: what an attacker uploaded to the knowledge base (issue findings, reproduced). Shared
by tests/kb/test_hostile_uploads.py (each ends ready or failed, never stuck) and bench/kb_hostile.py (how long)."""

import zlib


def repeated_open_tags(size_bytes: int) -> bytes:
    """HTML of nothing but "<a": the standard library's parser rescans the rest for every unclosed "<"."""
    return b"<a" * (size_bytes // 2)


def pdf_with_one_shared_stream(*, pages: int = 30, stream_bytes: int = 3_900_000) -> bytes:
    """A small PDF whose pages all draw one large compressed content stream: each page decompresses and interprets
    all of it again."""
    operators = b"BT /F1 12 Tf 72 720 Td (x) Tj ET\n"
    content = operators * (stream_bytes // len(operators))
    compressed = zlib.compress(content, 9)
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(compressed) + compressed + b"\nendstream",
    ]
    kids = []
    for _ in range(pages):
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >>"
            b" /Contents 4 0 R >>"
        )
        kids.append(b"%d 0 R" % len(objects))
    objects[1] = b"<< /Type /Pages /Kids [" + b" ".join(kids) + b"] /Count %d >>" % len(kids)
    pdf = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(pdf))
        pdf += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(pdf)
    pdf += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    pdf += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    pdf += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(pdf)


def markdown_of_headings(size_bytes: int) -> bytes:
    """Markdown of one short heading a line: each becomes a chunk of its own."""
    lines, total, number = [], 0, 0
    while total < size_bytes:
        line = f"# q{number}\n"
        lines.append(line)
        total += len(line)
        number += 1
    return "".join(lines).encode()
