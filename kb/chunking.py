"""Split knowledge-base documents into chunks that follow their structure and cite exact line ranges.

Pure functions: no database, no embeddings. A chunk's text is exactly lines line_start..line_end of the input
joined by "\\n", with one exception: a single line longer than max_tokens is cut between words (inside a word
only when that word alone is too long); each piece cites that line (line_start == line_end) but holds only part
of it, and pieces of a line do not overlap. No chunk exceeds max_tokens, as measured by estimate_tokens: every
run of text can be cut, so there is no indivisible exception.
"""

import math
import re
from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import accumulate

from markdown_it import MarkdownIt

from core.text import CJK, estimate_tokens

CONTENT_TYPES = frozenset({"markdown", "text", "rst", "html", "pdf", "code"})
MIN_MAX_TOKENS = 20
HEADING_SEPARATOR = " > "

# CommonMark block structure only: inline parsing (emphasis, links) would cost time, and titles keep their source
# text. No "normalize": the lines are already split on "\n" alone, and a stray "\r" must not add a line.
_BLOCKS_ONLY = ["normalize", "inline", "text_join"]
# Past maxNesting levels (a list and its item are two) the parser drops the rest of the document, so the headings
# after ten nested lists would be lost with the default 20; each level is a few Python frames.
_PARSER_OPTIONS = {"maxNesting": 100}
_MARKDOWN = MarkdownIt("commonmark", _PARSER_OPTIONS).disable(_BLOCKS_ONLY)
# The loaders' text of an HTML page: a line starting with "<" there is escaped body text, not raw HTML, so it
# must not open an HTML block that would hide the headings after it.
_HTML_TEXT = MarkdownIt("commonmark", _PARSER_OPTIONS).disable([*_BLOCKS_ONLY, "html_block"])
_MARKDOWN_TYPES = frozenset({"markdown", "html"})
_SETEXT_MARKUP = frozenset({"=", "-"})
_CODE_TOKENS = frozenset({"fence", "code_block"})
_FRONT_MATTER_OPEN = "---"
_FRONT_MATTER_CLOSE = frozenset({"---", "..."})
_TITLE_SEARCH_LINES = 16  # first_heading parses this many lines of Markdown first, then 8 times more, and so on
# Any repeated ASCII punctuation character may underline an rst title.
_RST_ADORNMENT = re.compile(r"^([!-/:-@\[-`{-~])\1+[ \t]*$")
_WORD_RUN = re.compile(r"\S+")
# What estimate_tokens counts: a run of letters/digits (a token per 4 characters), or one CJK or punctuation character.
_TOKEN_ATOM = re.compile(rf"(?P<letters>[^\W{CJK}]+)|\S")


@dataclass(frozen=True)
class Chunk:
    text: str
    heading_path: str  # "API reference > Rate limits"; "" outside any heading
    line_start: int  # 1-based, inclusive
    line_end: int  # 1-based, inclusive
    token_count: int


@dataclass(frozen=True)
class _Heading:
    line: int  # 0-based index of its first line
    size: int  # lines it spans: 1 for "#" Markdown, title lines + 1 for setext, 2 or 3 for rst (overline, underline)
    level: int
    title: str


@dataclass(frozen=True)
class _Section:
    start: int  # 0-based, inclusive
    end: int  # exclusive
    level: int  # 0 for the text before the first heading
    heading_size: int
    heading_path: str


@dataclass(frozen=True)
class _Unit:
    """Lines start..end-1 (0-based) that go into one chunk together; atomic units are never cut for overlap."""

    start: int
    end: int
    tokens: int
    atomic: bool = False


@dataclass(frozen=True)
class _Fragment:
    """A piece of one line too long for any chunk."""

    line: int
    text: str


@dataclass(frozen=True)
class _Structure:
    headings: list[_Heading]
    code_blocks: list[tuple[int, int]]  # Markdown code blocks as sorted, disjoint 0-based [start, end) line ranges


class _Lines:
    """The input's lines with per-line token estimates (blank lines count 0), summed in O(1) per range."""

    def __init__(self, text: str) -> None:
        self.lines = _split_lines(text)
        self.tokens = [estimate_tokens(line) if line.strip() else 0 for line in self.lines]
        self._prefix = [0, *accumulate(self.tokens)]

    def __len__(self) -> int:
        return len(self.lines)

    def is_blank(self, index: int) -> bool:
        return not self.lines[index].strip()

    def tokens_between(self, start: int, end: int) -> int:
        return self._prefix[end] - self._prefix[start]

    def unit(self, start: int, end: int, *, atomic: bool = False) -> _Unit:
        return _Unit(start, end, self.tokens_between(start, end), atomic)

    def text_between(self, start: int, end: int) -> str:
        return "\n".join(self.lines[start:end])


def chunk_document(text: str, *, content_type: str, max_tokens: int = 400, overlap_tokens: int = 50) -> list[Chunk]:
    """Split `text` into chunks of at most max_tokens that follow its headings, paragraphs and code blocks.

    Consecutive paragraphs of one section are packed together; sections are never mixed. When a section needs
    several chunks, each one after the first repeats the previous chunk's last lines (about overlap_tokens).
    """
    _validate_arguments(content_type, max_tokens, overlap_tokens)
    if not text.strip():
        return []
    doc = _Lines(text)
    structure = _structure(doc.lines, content_type)
    sections = _sections(doc, structure.headings)
    chunks: list[Chunk] = []
    for index, section in enumerate(sections):
        units = _section_units(doc, section, content_type, structure.code_blocks)
        following = sections[index + 1] if index + 1 < len(sections) else None
        if _is_bare_parent_heading(section, units, following):
            continue
        pieces = [piece for unit in units for piece in _fit(doc, unit, max_tokens)]
        chunks.extend(_pack(doc, pieces, section.heading_path, max_tokens, overlap_tokens))
    return chunks


def first_heading(text: str, *, content_type: str) -> str:
    """The title of the first heading the chunker would see ("" if none): the loaders' document title."""
    lines = _split_lines(text)
    if content_type not in _MARKDOWN_TYPES:
        return next((heading.title for heading in _structure(lines, content_type).headings if heading.title), "")
    # CommonMark blocks start line by line: the headings of the first lines are the document's, but for a paragraph
    # the next lines could still underline into a setext heading, and nothing follows that paragraph there. So a
    # title near the top costs no parse of the whole document.
    limit = _TITLE_SEARCH_LINES
    while True:
        headings = _markdown_structure(lines, content_type, limit=limit).headings
        title = next((heading.title for heading in headings if heading.title), "")
        if title or limit >= len(lines):
            return title
        limit *= 8


def _validate_arguments(content_type: str, max_tokens: int, overlap_tokens: int) -> None:
    if content_type not in CONTENT_TYPES:
        raise ValueError(f"unknown content_type {content_type!r}; expected one of {', '.join(sorted(CONTENT_TYPES))}")
    if max_tokens < MIN_MAX_TOKENS:
        raise ValueError(f"max_tokens must be at least {MIN_MAX_TOKENS}, got {max_tokens}")
    if not 0 <= overlap_tokens < max_tokens:
        raise ValueError(
            f"overlap_tokens must be at least 0 and less than max_tokens ({max_tokens}), got {overlap_tokens}"
        )


# --- Structure: headings and sections ---------------------------------------------------------------------------


def _split_lines(text: str) -> list[str]:
    # Only "\n" ends a line, as in editors and `wc -l`; a "\r" before it is part of a Windows line ending.
    return [line.removesuffix("\r") for line in text.split("\n")]


def _structure(lines: list[str], content_type: str) -> _Structure:
    if content_type in _MARKDOWN_TYPES:
        return _markdown_structure(lines, content_type)
    if content_type == "rst":
        return _Structure(_rst_headings(lines), [])
    return _Structure([], [])


def _markdown_structure(lines: list[str], content_type: str, *, limit: int | None = None) -> _Structure:
    """Top-level headings and every code block (fenced or indented), from one CommonMark parse of the lines
    (the first `limit` of them when given).

    Headings inside lists and blockquotes belong to those blocks and start no section; "#" lines in code are
    comments. The text of an HTML page only has the "#" headings the loaders write: a line of "-" or "=" under
    its body text stays text.
    """
    skipped = _front_matter_size(lines) if content_type == "markdown" else 0
    stop = len(lines) if limit is None else min(limit, len(lines))
    source = "\n" * skipped + "\n".join(lines[skipped:stop])  # front matter lines stay, blank: same numbering
    parser = _MARKDOWN if content_type == "markdown" else _HTML_TEXT
    tokens = parser.parse(source)
    headings: list[_Heading] = []
    code_blocks: list[tuple[int, int]] = []
    for index, token in enumerate(tokens):
        if token.map is None:
            continue
        start, end = token.map
        if token.type in _CODE_TOKENS:
            # An unclosed fence runs to the end of its container; its trailing blank lines are not code.
            while end > start + 1 and not lines[end - 1].strip():
                end -= 1
            code_blocks.append((start, end))
        elif token.type == "heading_open" and token.level == 0:
            if content_type == "html" and token.markup in _SETEXT_MARKUP:
                continue
            title = " ".join(line.strip() for line in tokens[index + 1].content.split("\n"))
            headings.append(_Heading(start, end - start, int(token.tag[1:]), title))
    return _Structure(headings, code_blocks)


def _front_matter_size(lines: list[str]) -> int:
    """Lines of a YAML front matter block: a first line "---" up to a closing "---" or "..." (0 if none)."""
    if lines[0].rstrip() != _FRONT_MATTER_OPEN:
        return 0
    closing = next((index for index in range(1, len(lines)) if lines[index].rstrip() in _FRONT_MATTER_CLOSE), None)
    return 0 if closing is None else closing + 1


def _rst_headings(lines: list[str]) -> list[_Heading]:
    styles: list[tuple[bool, str]] = []  # (overlined, character) in order of first use: that order sets the level
    headings = []
    index = 0
    while index < len(lines) - 1:
        found = _rst_heading_at(lines, index)
        if not found:
            index += 1
            continue
        style, title, size = found
        if style not in styles:
            styles.append(style)
        headings.append(_Heading(index, size, styles.index(style) + 1, title))
        index += size
    return headings


def _rst_heading_at(lines: list[str], index: int) -> tuple[tuple[bool, str], str, int] | None:
    """((overlined, character), title, line count) when a title starts at `index`; titles follow a blank line."""
    if index > 0 and lines[index - 1].strip():
        return None
    first, second = lines[index], lines[index + 1]
    overline = _RST_ADORNMENT.match(first)
    if overline and index + 2 < len(lines) and second.strip() and not _RST_ADORNMENT.match(second):
        underline = _RST_ADORNMENT.match(lines[index + 2])
        title = second.strip()
        if underline and underline.group(1) == overline.group(1) and len(underline.group(0).rstrip()) >= len(title):
            return (True, overline.group(1)), title, 3
        return None
    underline = _RST_ADORNMENT.match(second)
    if overline or not underline or not first.strip() or first[0].isspace():
        return None
    if len(second.rstrip()) < len(first.rstrip()):
        return None
    return (False, underline.group(1)), first.strip(), 2


def _sections(doc: _Lines, headings: list[_Heading]) -> list[_Section]:
    first_start = headings[0].line if headings else len(doc)
    sections = [_Section(0, first_start, 0, 0, "")] if first_start > 0 else []
    path: list[_Heading] = []
    for index, heading in enumerate(headings):
        # A deeper heading nests under the open ones; a same-or-higher level one replaces them.
        while path and path[-1].level >= heading.level:
            path.pop()
        path.append(heading)
        end = headings[index + 1].line if index + 1 < len(headings) else len(doc)
        heading_path = HEADING_SEPARATOR.join(open_heading.title for open_heading in path if open_heading.title)
        sections.append(_Section(heading.line, end, heading.level, heading.size, heading_path))
    return sections


def _is_bare_parent_heading(section: _Section, units: list[_Unit], following: _Section | None) -> bool:
    """A heading with no text of its own, directly followed by its first subsection: its title lives on there."""
    only_heading = len(units) == 1 and section.heading_size > 0
    return only_heading and following is not None and following.level > section.level


# --- Blocks: paragraphs, code blocks, top-level code definitions ------------------------------------------------


def _section_units(
    doc: _Lines, section: _Section, content_type: str, code_blocks: list[tuple[int, int]]
) -> list[_Unit]:
    body_start = section.start + section.heading_size
    heading = [doc.unit(section.start, body_start)] if section.heading_size else []
    if content_type in _MARKDOWN_TYPES:
        return heading + _markdown_blocks(doc, body_start, section.end, code_blocks)
    if content_type == "code":
        return _code_blocks(doc, body_start, section.end)
    return heading + _paragraphs(doc, body_start, section.end)


def _paragraphs(doc: _Lines, start: int, end: int) -> list[_Unit]:
    """Runs of non-blank lines."""
    units = []
    run_start: int | None = None
    for index in range(start, end + 1):
        if index < end and not doc.is_blank(index):
            run_start = index if run_start is None else run_start
        elif run_start is not None:
            units.append(doc.unit(run_start, index))
            run_start = None
    return units


def _markdown_blocks(doc: _Lines, start: int, end: int, code_blocks: list[tuple[int, int]]) -> list[_Unit]:
    """Paragraphs and code blocks, fenced or indented; a fence may interrupt a paragraph without a blank line."""
    units: list[_Unit] = []
    text_start = start
    index = bisect_left(code_blocks, (start,))
    while index < len(code_blocks) and code_blocks[index][0] < end:
        code_start, code_end = code_blocks[index]
        units += _paragraphs(doc, text_start, code_start)
        units.append(doc.unit(code_start, code_end, atomic=True))
        text_start = code_end
        index += 1
    return units + _paragraphs(doc, text_start, end)


def _code_blocks(doc: _Lines, start: int, end: int) -> list[_Unit]:
    """Top-level definitions: a blank line followed by an unindented line starts a new block."""
    units = []
    block_start: int | None = None
    last_text = start
    for index in range(start, end):
        if doc.is_blank(index):
            continue
        if block_start is None:
            block_start = index
        elif index > last_text + 1 and _starts_top_level(doc.lines[index]):
            units.append(doc.unit(block_start, last_text + 1))
            block_start = index
        last_text = index
    if block_start is not None:
        units.append(doc.unit(block_start, last_text + 1))
    return units


def _starts_top_level(line: str) -> bool:
    # A closing bracket at column 0 ends the definition above it rather than starting a new one.
    return not line[0].isspace() and not line.startswith((")", "]", "}"))


# --- Sizing: cut what cannot fit, then pack ---------------------------------------------------------------------


def _fit(doc: _Lines, unit: _Unit, max_tokens: int) -> Iterator[_Unit | _Fragment]:
    """The unit itself when it fits; else its paragraphs, else its lines, else pieces of its lines."""
    if unit.tokens <= max_tokens:
        yield unit
        return
    paragraphs = _paragraphs(doc, unit.start, unit.end)
    if len(paragraphs) > 1:
        for paragraph in paragraphs:
            yield from _fit(doc, paragraph, max_tokens)
        return
    for index in range(unit.start, unit.end):
        if doc.tokens[index] <= max_tokens:
            if not doc.is_blank(index):
                yield doc.unit(index, index + 1)
        else:
            yield from (_Fragment(index, piece) for piece in _split_line(doc.lines[index], max_tokens))


def _split_line(line: str, max_tokens: int) -> Iterator[str]:
    """Pieces of a too-long line, cut between words; a word longer than max_tokens is cut inside it."""
    yield from _greedy_pieces(line, _WORD_RUN, _word_tokens, max_tokens, _split_word)


def _split_word(word: str, max_tokens: int) -> Iterator[str]:
    """Pieces of a too-long word, cut between its estimate's atoms: letter runs, CJK characters, punctuation."""
    yield from _greedy_pieces(word, _TOKEN_ATOM, _atom_tokens, max_tokens, _split_letter_run)


def _word_tokens(match: re.Match[str]) -> int:
    return estimate_tokens(match.group())


def _atom_tokens(match: re.Match[str]) -> int:
    # Same count as estimate_tokens, without its three regex scans per call (a minified file has millions of atoms).
    return max(1, math.ceil(len(match.group()) / 4)) if match.lastgroup == "letters" else 1


def _split_letter_run(run: str, max_tokens: int) -> Iterator[str]:
    size = 4 * max_tokens  # estimate_tokens counts a letter run as one token per 4 characters
    yield from (run[start : start + size] for start in range(0, len(run), size))


def _greedy_pieces(
    text: str,
    part: re.Pattern[str],
    part_tokens: Callable[[re.Match[str]], int],
    max_tokens: int,
    split_part: Callable[[str, int], Iterator[str]],
) -> Iterator[str]:
    """Consecutive `part` matches packed into pieces of at most max_tokens; a part too big alone is split_part."""
    piece_start: int | None = None
    piece_end = piece_tokens = 0
    for match in part.finditer(text):
        tokens = part_tokens(match)
        if piece_start is not None and piece_tokens + tokens > max_tokens:
            yield text[piece_start:piece_end]
            piece_start = None
        if tokens > max_tokens:
            yield from split_part(match.group(), max_tokens)
            continue
        if piece_start is None:
            piece_start, piece_tokens = match.start(), 0
        piece_end = match.end()
        piece_tokens += tokens  # the parts' estimates add up to the piece's: no token spans two parts
    if piece_start is not None:
        yield text[piece_start:piece_end]


def _pack(
    doc: _Lines, pieces: list[_Unit | _Fragment], heading_path: str, max_tokens: int, overlap_tokens: int
) -> list[Chunk]:
    chunks: list[Chunk] = []
    current: list[_Unit] = []
    current_tokens = 0
    for piece in pieces:
        if isinstance(piece, _Fragment):
            if current:
                chunks.append(_chunk_of_units(doc, current, heading_path))
                current, current_tokens = [], 0
            chunks.append(Chunk(piece.text, heading_path, piece.line + 1, piece.line + 1, estimate_tokens(piece.text)))
            continue
        if current and current_tokens + piece.tokens > max_tokens:
            chunks.append(_chunk_of_units(doc, current, heading_path))
            current = _overlap(doc, current, min(overlap_tokens, max_tokens - piece.tokens))
            current_tokens = sum(unit.tokens for unit in current)
        current.append(piece)
        current_tokens += piece.tokens
    if current:
        chunks.append(_chunk_of_units(doc, current, heading_path))
    return chunks


def _overlap(doc: _Lines, units: list[_Unit], budget: int) -> list[_Unit]:
    """The trailing whole lines of `units` within `budget` tokens; a code fence is repeated whole or not at all."""
    taken: list[_Unit] = []
    total = 0
    for unit in reversed(units):
        if unit.atomic:
            if total + unit.tokens > budget:
                break
            taken.append(unit)
            total += unit.tokens
            continue
        start = unit.end
        while start > unit.start and total + doc.tokens[start - 1] <= budget:
            start -= 1
            total += doc.tokens[start]
        if start < unit.end:
            taken.append(doc.unit(start, unit.end))
        if start > unit.start:
            break
    taken.reverse()
    return _without_leading_blank_lines(doc, taken)


def _without_leading_blank_lines(doc: _Lines, units: list[_Unit]) -> list[_Unit]:
    while units and doc.is_blank(units[0].start):
        first = units[0]
        units = units[1:] if first.end == first.start + 1 else [doc.unit(first.start + 1, first.end), *units[1:]]
    return units


def _chunk_of_units(doc: _Lines, units: list[_Unit], heading_path: str) -> Chunk:
    start, end = units[0].start, units[-1].end
    text = doc.text_between(start, end)
    return Chunk(text, heading_path, start + 1, end, estimate_tokens(text))
