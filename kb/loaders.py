"""Read knowledge-base files into text to chunk: Markdown, plain text, rst, HTML, PDF and source code.

Pure: no database. The line numbers chunking reports refer to lines of LoadedDocument.text, which for HTML
and PDF is the extracted text, not the original file.
"""

import codecs
import io
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from lxml import etree
from pypdf import PageObject, PasswordType, PdfReader

from kb.chunking import first_heading

CODE_LANGUAGES: dict[str, str] = {
    ".py": "python",
    ".js": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".tsx": "typescript",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".c": "c",
    ".h": "c",
    ".cpp": "cpp",
    ".hpp": "cpp",
    ".cs": "csharp",
    ".rb": "ruby",
    ".php": "php",
    ".sh": "shell",
    ".sql": "sql",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".toml": "toml",
    ".json": "json",
    ".css": "css",
    ".kt": "kotlin",
    ".swift": "swift",
    ".scala": "scala",
}
_DOCUMENT_TYPES: dict[str, str] = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    "": "text",
    ".rst": "rst",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
}
_LOADABLE_TYPES = frozenset({*_DOCUMENT_TYPES.values(), "code"})
# Files without an extension (README, LICENSE) are also loaded, as text.
SUPPORTED_EXTENSIONS: frozenset[str] = frozenset((_DOCUMENT_TYPES.keys() - {""}) | CODE_LANGUAGES.keys())
TITLE_MAX_CHARS = 500  # Document.title's max_length


class DocumentLoadError(Exception):
    """A file the knowledge base cannot read; `reason` is short enough to show to whoever uploaded it."""

    def __init__(self, filename: str, reason: str) -> None:
        super().__init__(f"cannot load {filename}: {reason}")
        self.filename = filename
        self.reason = reason


class UnsupportedFileType(DocumentLoadError):
    """The file's extension is not one the knowledge base reads (see SUPPORTED_EXTENSIONS)."""


@dataclass(frozen=True)
class LoadedDocument:
    text: str  # what to chunk; chunk line numbers refer to its lines
    content_type: str  # "markdown", "text", "rst", "html", "pdf" or "code"
    title: str
    language: str  # for code: "python", "javascript", ...; "" otherwise


def load_document(path: Path) -> LoadedDocument:
    """Read and convert the file at `path`; raises DocumentLoadError naming the file and the reason."""
    path = Path(path)
    _file_type(str(path))  # refuse unsupported files before reading them
    return load_bytes(_read_file(path), filename=str(path))


def load_bytes(
    data: bytes, *, filename: str, content_type: str | None = None, max_pdf_pages: int | None = None
) -> LoadedDocument:
    """Convert uploaded `data`; `filename` picks the type (by extension) and is the title of last resort.

    content_type ("markdown", "text", "rst", "html", "pdf" or "code") overrides the extension; code then takes
    its language from the extension when it has a known one. A PDF of more than max_pdf_pages pages is refused.
    """
    if content_type is None:
        content_type, language = _file_type(filename)
    elif content_type in _LOADABLE_TYPES:
        language = CODE_LANGUAGES.get(Path(filename).suffix.lower(), "") if content_type == "code" else ""
    else:
        raise UnsupportedFileType(filename, f"unsupported content type {content_type}")
    if content_type == "pdf":
        text, title = _pdf_text_and_title(data, filename, max_pages=max_pdf_pages)
    elif content_type == "html":
        text, title = _html_text_and_title(_decode_utf8(data, filename))
    else:
        text = _decode_utf8(data, filename)
        title = first_heading(text, content_type=content_type)
    return LoadedDocument(text=text, content_type=content_type, title=_clean_title(title, filename), language=language)


def resolve_content_type(filename: str, content_type: str | None = None) -> str:
    """The content type `load_bytes` would read the file as; UnsupportedFileType when it reads none."""
    if content_type is None:
        return _file_type(filename)[0]
    if content_type not in _LOADABLE_TYPES:
        raise UnsupportedFileType(filename, f"unsupported content type {content_type}")
    return content_type


def _file_type(filename: str) -> tuple[str, str]:
    """(content_type, language) for the file's extension."""
    name = Path(filename).name
    # A dotfile (.env, .gitignore) is configuration, often secret: its name is its extension, not "no extension".
    extension = (Path(name).suffix or (name if name.startswith(".") else "")).lower()
    if extension in CODE_LANGUAGES:
        return "code", CODE_LANGUAGES[extension]
    if extension in _DOCUMENT_TYPES:
        return _DOCUMENT_TYPES[extension], ""
    raise UnsupportedFileType(filename, f"unsupported file type {extension}")


def _read_file(path: Path) -> bytes:
    try:
        mode = path.stat().st_mode
        if stat.S_ISDIR(mode):
            raise DocumentLoadError(str(path), "is a directory")
        if not stat.S_ISREG(mode):
            raise DocumentLoadError(str(path), "not a regular file")  # reading a FIFO or device could block forever
        return path.read_bytes()
    except FileNotFoundError as error:
        raise DocumentLoadError(str(path), "file not found") from error
    except PermissionError as error:
        raise DocumentLoadError(str(path), "permission denied") from error
    except IsADirectoryError as error:
        raise DocumentLoadError(str(path), "is a directory") from error
    except OSError as error:
        raise DocumentLoadError(str(path), (error.strerror or type(error).__name__).lower()) from error


def _decode_utf8(data: bytes, filename: str) -> str:
    bom = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        text = data[bom:].decode("utf-8")
    except UnicodeDecodeError as error:
        offset = bom + error.start
        raise DocumentLoadError(filename, f"not valid UTF-8 (byte 0x{data[offset]:02x} at offset {offset})") from error
    if "\x00" in text:
        # PostgreSQL text cannot hold NUL, and a NUL in a text file means it is binary.
        raise DocumentLoadError(filename, f"binary content (NUL byte at offset {data.index(0)})")
    return _normalise_line_endings(text)


def _normalise_line_endings(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _clean_title(title: str, filename: str) -> str:
    title = " ".join(title.split()) or Path(filename).name
    return title[:TITLE_MAX_CHARS]


# --- PDF --------------------------------------------------------------------------------------------------------


def _pdf_text_and_title(data: bytes, filename: str, *, max_pages: int | None = None) -> tuple[str, str]:
    """The text of each page, pages separated by a blank line, and the metadata title."""
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not _opens_without_password(reader):
            raise DocumentLoadError(filename, "encrypted PDF")
        if max_pages is not None and len(reader.pages) > max_pages:
            raise DocumentLoadError(
                filename, f"{len(reader.pages):,} pages; the limit is {max_pages:,} (KB_MAX_PDF_PAGES)"
            )
        pages = [_page_text(page) for page in reader.pages]
        title = _pdf_metadata_title(reader)
    except (DocumentLoadError, MemoryError):  # a memory limit is the reader's, not the file's fault to name
        raise
    except Exception as error:  # pypdf raises many types (PdfReadError, ValueError, KeyError, ...) on damaged files
        raise DocumentLoadError(filename, f"broken PDF: {_short_description(error)}") from error
    text = "\n\n".join(page for page in pages if page)
    if not text:
        raise DocumentLoadError(filename, "PDF has no extractable text")
    return text, title


def _page_text(page: PageObject) -> str:
    # NUL cannot be stored in PostgreSQL text; some PDF fonts map glyphs to it.
    return _normalise_line_endings(page.extract_text() or "").replace("\x00", "").strip()


def _opens_without_password(reader: PdfReader) -> bool:
    # Many PDFs only restrict printing or copying (owner password): every viewer opens them with an empty password.
    try:
        return reader.decrypt("") != PasswordType.NOT_DECRYPTED
    except Exception:  # an unsupported cipher (e.g. AES without the `cryptography` package) is as good as locked
        return False


def _pdf_metadata_title(reader: PdfReader) -> str:
    metadata = reader.metadata
    title = metadata.title if metadata else None
    return str(title) if title else ""


def _short_description(error: Exception) -> str:
    description = str(error).strip() or type(error).__name__
    return description if len(description) <= 200 else description[:199] + "…"


# --- HTML -------------------------------------------------------------------------------------------------------

_SKIPPED_TAGS = frozenset({"script", "style", "noscript", "template"})
_HEADING_LEVELS = {f"h{level}": level for level in range(1, 7)}
_PARAGRAPH_TAGS = frozenset(
    {
        "address",
        "article",
        "aside",
        "blockquote",
        "details",
        "dl",
        "div",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "header",
        "hr",
        "main",
        "nav",
        "ol",
        "p",
        "section",
        "summary",
        "table",
        "ul",
    }
)
_LINE_TAGS = frozenset({"br", "caption", "dd", "dt", "li", "tr"})
_CELL_TAGS = frozenset({"td", "th"})
_WHITESPACE = re.compile(r"\s+")
# Text lines the chunker would take for Markdown headings or code fences.
_MARKDOWN_SYNTAX = re.compile(r"^(#{1,6}(?:[ \t]|$)|```|~~~)")
_BACKTICK_RUN = re.compile(r"`+")


def _html_text_and_title(html: str) -> tuple[str, str]:
    # libxml2's HTML parser, in linear time: the standard library's rescans the rest of the input for every unclosed
    # "<" (quadratic, so a hostile page of repeated "<a" held a worker for minutes).
    converter = _HTMLToText()
    parser = etree.HTMLParser(target=converter, no_network=True, recover=True, remove_comments=True, huge_tree=False)
    parser.feed(html)
    parser.close()
    return converter.text(), converter.title or converter.first_h1


class _HTMLToText:
    """Readable text: blocks become lines and paragraphs, headings "## Title", <pre> a fenced code block. The target
    of lxml's parser: it is handed each start and end tag (implied ones included) and each run of text."""

    def __init__(self) -> None:
        self.title = ""
        self.first_h1 = ""
        self._lines: list[str] = []
        self._line: list[str] = []
        self._line_prefix = ""
        self._skip_depth = 0
        self._pre_depth = 0
        self._pre: list[str] = []
        self._heading_level = 0
        self._heading: list[str] = []
        self._title: list[str] | None = None

    def text(self) -> str:
        self._end_line()
        return "\n".join(self._lines).strip("\n")

    def close(self) -> None:
        if self._heading_level:
            self._emit_heading()
        if self._pre_depth:
            self._emit_code_block()

    def start(self, tag: str, attrib: dict) -> None:
        if tag in _SKIPPED_TAGS:
            self._skip_depth += 1
        elif self._skip_depth:
            return
        elif tag == "title":
            self._title = []
        elif tag == "pre":
            if not self._pre_depth:
                self._end_paragraph()
            self._pre_depth += 1
        elif self._pre_depth:
            if tag == "br":
                self._pre.append("\n")
        elif self._heading_level:
            if tag in _PARAGRAPH_TAGS or tag in _LINE_TAGS:
                self._heading.append(" ")  # a heading stays on one line
        elif tag in _HEADING_LEVELS:
            self._end_paragraph()
            self._heading_level, self._heading = _HEADING_LEVELS[tag], []
        else:
            self._start_block(tag)

    def end(self, tag: str) -> None:
        if tag in _SKIPPED_TAGS:
            self._skip_depth = max(0, self._skip_depth - 1)
        elif self._skip_depth:
            return
        elif tag == "title" and self._title is not None:
            self.title = self.title or " ".join("".join(self._title).split())
            self._title = None
        elif tag == "pre" and self._pre_depth:
            self._pre_depth -= 1
            if not self._pre_depth:
                self._emit_code_block()
        elif self._pre_depth:
            return
        elif tag in _HEADING_LEVELS and self._heading_level:
            self._emit_heading()
        elif tag in _PARAGRAPH_TAGS:
            self._end_paragraph()
        elif tag in _LINE_TAGS:
            self._end_line()

    def data(self, data: str) -> None:
        if self._skip_depth:
            return
        if self._title is not None:
            self._title.append(data)
        elif self._pre_depth:
            self._pre.append(data)
        elif self._heading_level:
            self._heading.append(data)
        else:
            self._line.append(_WHITESPACE.sub(" ", data))

    def _start_block(self, tag: str) -> None:
        if tag in _PARAGRAPH_TAGS:
            self._end_paragraph()
        elif tag == "br" and not "".join(self._line).strip():
            self._end_paragraph()  # <br><br> separates paragraphs
        elif tag in _LINE_TAGS:
            self._end_line()
            self._line_prefix = "- " if tag == "li" else ""
        elif tag in _CELL_TAGS and "".join(self._line).strip():
            self._line.append(" | ")

    def _end_line(self) -> None:
        line = "".join(self._line).strip()
        if line:
            if not self._line_prefix and _MARKDOWN_SYNTAX.match(line):
                line = "\\" + line  # escaped, so body text is never mistaken for a heading or a fence
            self._lines.append(self._line_prefix + line)
        self._line, self._line_prefix = [], ""

    def _end_paragraph(self) -> None:
        self._end_line()
        if self._lines and self._lines[-1]:
            self._lines.append("")

    def _emit_heading(self) -> None:
        title = " ".join("".join(self._heading).split())
        if title:
            self._lines += ["#" * self._heading_level + " " + title, ""]
            if self._heading_level == 1 and not self.first_h1:
                self.first_h1 = title
        self._heading_level, self._heading = 0, []

    def _emit_code_block(self) -> None:
        code = _normalise_line_endings("".join(self._pre)).removeprefix("\n").rstrip()
        self._pre = []
        if not code.strip():
            return
        # The fence is longer than any backtick run inside, so the code cannot close it early.
        longest_run = max((len(run) for run in _BACKTICK_RUN.findall(code)), default=0)
        fence = "`" * max(3, longest_run + 1)
        self._lines += [fence, *code.split("\n"), fence, ""]
