"""Chunking knowledge-base documents: structure-following chunks that cite exact line ranges."""

import random

import pytest

from core.text import estimate_tokens
from kb.chunking import Chunk, chunk_document, first_heading

RUNBOOK = """\
# Payments API

Operator notes for the payments service.

## Authentication

Every request carries an API key in the Authorization header.
Keys are scoped to one tenant.

```bash
# rotate a key
curl -X POST https://api.example.com/v1/keys/rotate \\
  -H "Authorization: Bearer $KEY"
```

### Key rotation

Rotate keys every 90 days.

## Rate limits

Each key may send 100 requests per minute; bursts of 20 are absorbed.
Requests over the limit get HTTP 429 with a Retry-After header.
The limit is shared by every process that uses the same key.
Batch endpoints count each item in the batch as one request.
Webhook deliveries do not count against the limit.
Contact support to raise the limit for a production key.

Limits reset at the start of each minute, not on a sliding window.

# Changelog

Version 2 added idempotency keys.
"""


def cited_lines(text: str, chunk: Chunk) -> str:
    return "\n".join(text.split("\n")[chunk.line_start - 1 : chunk.line_end])


def assert_chunks_cite_their_lines(text: str, chunks: list[Chunk], max_tokens: int) -> None:
    for chunk in chunks:
        assert chunk.text.strip()
        assert chunk.text == cited_lines(text, chunk)
        assert chunk.token_count == estimate_tokens(chunk.text) <= max_tokens


def test_markdown_chunks_follow_headings_and_cite_exact_lines():
    chunks = chunk_document(RUNBOOK, content_type="markdown", max_tokens=90, overlap_tokens=20)

    assert [(chunk.heading_path, chunk.line_start, chunk.line_end) for chunk in chunks] == [
        ("Payments API", 1, 3),
        ("Payments API > Authentication", 5, 14),
        ("Payments API > Authentication > Key rotation", 16, 18),
        ("Payments API > Rate limits", 20, 25),
        ("Payments API > Rate limits", 25, 29),
        ("Changelog", 31, 33),
    ]
    assert_chunks_cite_their_lines(RUNBOOK, chunks, max_tokens=90)


def test_a_code_block_stays_whole_and_its_comments_are_not_headings():
    chunks = chunk_document(RUNBOOK, content_type="markdown", max_tokens=90, overlap_tokens=20)

    authentication = chunks[1]
    assert authentication.text.startswith("## Authentication\n")
    assert authentication.text.endswith('-H "Authorization: Bearer $KEY"\n```')
    assert "```bash\n# rotate a key\ncurl" in authentication.text
    assert not any("rotate a key" in chunk.heading_path for chunk in chunks)


def test_a_long_section_is_split_with_overlapping_lines():
    chunks = chunk_document(RUNBOOK, content_type="markdown", max_tokens=90, overlap_tokens=20)

    first, second = chunks[3:5]
    assert first.text.startswith("## Rate limits")
    assert first.text.endswith("Batch endpoints count each item in the batch as one request.")
    assert second.text.startswith("Batch endpoints count each item in the batch as one request.\nWebhook deliveries")
    assert second.text.endswith("not on a sliding window.")
    repeated = cited_lines(RUNBOOK, Chunk("", "", second.line_start, first.line_end, 0))
    assert 0 < estimate_tokens(repeated) <= 20


def test_overlap_zero_repeats_nothing():
    chunks = chunk_document(RUNBOOK, content_type="markdown", max_tokens=40, overlap_tokens=0)

    assert len(chunks) > 6
    for previous, chunk in zip(chunks, chunks[1:], strict=False):
        assert chunk.line_start > previous.line_end
    assert_chunks_cite_their_lines(RUNBOOK, chunks, max_tokens=40)


def test_sections_are_never_merged_and_overlap_stops_at_their_boundary():
    text = "# One\n\nFirst section text.\n\n# Two\n\nSecond section text.\n"

    chunks = chunk_document(text, content_type="markdown", max_tokens=400, overlap_tokens=50)

    assert [(chunk.heading_path, chunk.text) for chunk in chunks] == [
        ("One", "# One\n\nFirst section text."),
        ("Two", "# Two\n\nSecond section text."),
    ]


def test_a_heading_directly_followed_by_its_subsection_lives_on_in_the_heading_path():
    text = "# Guide\n\n## Install\n\nRun the installer.\n\n## Empty section\n"

    chunks = chunk_document(text, content_type="markdown")

    assert [(chunk.heading_path, chunk.text) for chunk in chunks] == [
        ("Guide > Install", "## Install\n\nRun the installer."),
        ("Guide > Empty section", "## Empty section"),
    ]


# Markdown structure is CommonMark's: (text, the (heading_path, line_start, line_end) of each chunk).
MARKDOWN_STRUCTURE_CASES = [
    pytest.param("Title\n=====\n\nBody text.\n", [("Title", 1, 4)], id="setext-equals-is-level-1"),
    pytest.param(
        "Guide\n=====\n\nIntro.\n\nInstall\n-------\n\nRun it.\n",
        [("Guide", 1, 4), ("Guide > Install", 6, 9)],
        id="setext-dashes-is-level-2",
    ),
    pytest.param(
        "Guide\n=====\n\nInstall\n-------\n\nRun it.\n",
        [("Guide > Install", 4, 7)],
        id="bare-setext-parent-folds-into-its-subsection",
    ),
    pytest.param(
        "First line\nsecond line\n===\n\nBody.\n",
        [("First line second line", 1, 5)],
        id="setext-title-of-two-lines",
    ),
    pytest.param(
        "Intro text.\n\nRelease notes\n---\n\nFixed bugs.\n",
        [("", 1, 1), ("Release notes", 3, 6)],
        id="dashes-under-a-paragraph-are-a-heading",
    ),
    pytest.param("Text.\n\n---\n\nMore.\n", [("", 1, 5)], id="dashes-after-a-blank-line-are-a-break"),
    pytest.param(
        "Real\n====\n\n```\nNot a title\n===========\n```\n",
        [("Real", 1, 7)],
        id="setext-inside-a-fence-is-code",
    ),
    pytest.param(
        "# Top\n\n```\n# not a heading\nNor this\n---\n\n",
        [("Top", 1, 6)],
        id="unclosed-fence-runs-to-the-end",
    ),
    pytest.param(
        "# Manual\n\nIntro.\n\nSetup\n-----\n\nSteps.\n\n### Details\n\nMore.\n\nUsage\n=====\n\nUse it.\n",
        [("Manual", 1, 3), ("Manual > Setup", 5, 8), ("Manual > Setup > Details", 10, 12), ("Usage", 14, 17)],
        id="atx-and-setext-nest-by-level",
    ),
    pytest.param(
        "# Real\n\n> # Quoted\n> ---\n\n- item\n\n  ## Inside the item\n\n  Item text.\n",
        [("Real", 1, 10)],
        id="headings-in-blockquotes-and-lists-start-no-section",
    ),
    pytest.param(
        "".join(f"{'  ' * depth}- level {depth}\n" for depth in range(30)) + "\n# After the outline\n\nText.\n",
        [("", 1, 30), ("After the outline", 32, 34)],
        id="headings-after-a-deeply-nested-list-still-count",
    ),
    pytest.param(
        "   # Three spaces\n\n#\n\n## Closed ##\n\n#hashtag\n\n    # four spaces: code\n",
        [("Three spaces", 1, 1), ("Closed", 5, 9)],
        id="atx-indent-empty-closing-and-no-space",
    ),
    pytest.param(
        "---\ntitle: Guide\nlayout: page\n---\n\n# Guide\n\nText.\n",
        [("", 1, 4), ("Guide", 6, 8)],
        id="front-matter-is-text-before-the-first-heading",
    ),
    pytest.param(
        "用户指南\n====\n\n欢迎阅读本指南。\n\n安装\n--\n\n使用 pip 安装。\n",
        [("用户指南", 1, 4), ("用户指南 > 安装", 6, 9)],
        id="chinese-setext-titles",
    ),
    pytest.param(
        "# 手册\n\n简介。\n\n配置\n----\n\n```\n配置文件\n========\n```\n",
        [("手册", 1, 3), ("手册 > 配置", 5, 11)],
        id="chinese-setext-under-atx-and-in-a-fence",
    ),
]


@pytest.mark.parametrize(("text", "expected"), MARKDOWN_STRUCTURE_CASES)
def test_markdown_headings_follow_commonmark(text, expected):
    chunks = chunk_document(text, content_type="markdown")

    assert [(chunk.heading_path, chunk.line_start, chunk.line_end) for chunk in chunks] == expected
    assert_chunks_cite_their_lines(text, chunks, max_tokens=400)


@pytest.mark.parametrize(
    ("text", "title"),
    [
        pytest.param("Payments guide\n==============\n\nBody.\n", "Payments guide", id="setext"),
        pytest.param("---\ntitle: x\n---\n\nIntro\n\n## Install\n", "Install", id="after-front-matter"),
        pytest.param("- # In a list\n\n> # Quoted\n\n    # code\n\nText.\n", "", id="none-at-top-level"),
        pytest.param("#\n\n用户指南\n----\n", "用户指南", id="chinese-after-an-empty-heading"),
    ],
)
def test_first_heading_is_the_first_titled_markdown_heading(text, title):
    assert first_heading(text, content_type="markdown") == title


def test_first_heading_finds_a_setext_title_after_any_number_of_lines():
    # first_heading parses a growing number of lines (16, 128...): the underline may come just past a cut.
    for intro_lines in [*range(40), *range(100, 160)]:
        text = "Intro.\n" * intro_lines + "\nLate title\n==========\n\nBody.\n"

        assert first_heading(text, content_type="markdown") == "Late title", intro_lines


def test_first_heading_skips_long_front_matter():
    text = "---\n" + "".join(f"key{number}: value\n" for number in range(600)) + "---\n\nReal title\n---\n"

    assert first_heading(text, content_type="markdown") == "Real title"


def test_html_text_has_only_the_loaders_headings():
    # The loaders write "#" headings; other text of the page stays text, whatever Markdown would make of it.
    text = "# Results\n\nBody text\n---\n\n<script> tags load first.\n\n## Limits\n\nMore.\n"

    chunks = chunk_document(text, content_type="html")

    assert [(chunk.heading_path, chunk.line_start, chunk.line_end) for chunk in chunks] == [
        ("Results", 1, 6),
        ("Results > Limits", 8, 10),
    ]


def test_an_indented_code_block_stays_whole_and_its_comments_are_not_headings():
    text = (
        "# Build\n\nRun the build on a clean checkout, after pulling the latest tags.\n\n"
        "    # configure\n    ./configure --prefix=/usr\n\n    # compile\n    make -j4 all\n"
    )

    chunks = chunk_document(text, content_type="markdown", max_tokens=45, overlap_tokens=10)

    assert [(chunk.heading_path, chunk.line_start, chunk.line_end) for chunk in chunks] == [
        ("Build", 1, 3),
        ("Build", 5, 9),
    ]
    assert_chunks_cite_their_lines(text, chunks, max_tokens=45)


def test_a_code_block_that_does_not_fit_after_text_starts_a_new_chunk():
    code = "\n".join(f"    step_{number}()" for number in range(8))
    text = f"# Setup\n\n{'Words here. ' * 8}\n\n```python\ndef setup():\n{code}\n```\n"

    chunks = chunk_document(text, content_type="markdown", max_tokens=50, overlap_tokens=10)

    assert [chunk.text.split("\n")[0] for chunk in chunks] == ["# Setup", "```python"]
    assert chunks[1].text.endswith("step_7()\n```")
    assert_chunks_cite_their_lines(text, chunks, max_tokens=50)


def test_a_code_block_larger_than_max_tokens_is_split_by_lines():
    body = "\n".join(f"result_{number} = compute(value_{number}, option={number})" for number in range(40))
    text = f"## Script\n\n```python\n{body}\n```\n"

    chunks = chunk_document(text, content_type="markdown", max_tokens=60, overlap_tokens=10)

    assert len(chunks) > 3
    assert chunks[0].line_start == 1
    assert chunks[-1].line_end == 44
    assert {chunk.heading_path for chunk in chunks} == {"Script"}
    assert_chunks_cite_their_lines(text, chunks, max_tokens=60)


def test_rst_underlined_titles_are_headings_leveled_by_first_use():
    text = """\
==========
User guide
==========

Welcome to the guide.

Installation
============

Use pip.

Upgrading
---------

Read the notes first.

Usage
=====

Import the package.
"""

    chunks = chunk_document(text, content_type="rst")

    assert [(chunk.heading_path, chunk.line_start, chunk.line_end) for chunk in chunks] == [
        ("User guide", 1, 5),
        ("User guide > Installation", 7, 10),
        ("User guide > Installation > Upgrading", 12, 15),
        ("User guide > Usage", 17, 20),
    ]
    assert_chunks_cite_their_lines(text, chunks, max_tokens=400)


def test_rst_short_underlines_and_transitions_are_not_headings():
    text = "A long title line\n===\n\nText.\n\n----------\n\nMore text.\n"

    chunks = chunk_document(text, content_type="rst")

    assert [chunk.heading_path for chunk in chunks] == [""]


def test_plain_text_packs_paragraphs_and_has_no_headings():
    paragraphs = [f"# Paragraph {number} talks about the deployment pipeline at length." for number in range(6)]
    text = "\n\n".join(paragraphs) + "\n"

    chunks = chunk_document(text, content_type="text", max_tokens=40, overlap_tokens=0)

    assert [(chunk.line_start, chunk.line_end) for chunk in chunks] == [(1, 3), (5, 7), (9, 11)]
    assert {chunk.heading_path for chunk in chunks} == {""}
    assert_chunks_cite_their_lines(text, chunks, max_tokens=40)


def test_code_splits_between_top_level_definitions():
    text = '''\
import os


def first():
    value = os.getcwd()

    return value


class Second:
    """A class with a docstring that is long enough to need its own chunk when packed."""

    def method(self):
        return "method"
'''

    chunks = chunk_document(text, content_type="code", max_tokens=50, overlap_tokens=0)

    assert [(chunk.line_start, chunk.line_end) for chunk in chunks] == [(1, 7), (10, 14)]
    assert {chunk.heading_path for chunk in chunks} == {""}
    assert_chunks_cite_their_lines(text, chunks, max_tokens=50)


def test_a_closing_brace_stays_with_its_function():
    text = "func a() int {\n\treturn compute(first, second)\n\n}\n\nfunc b() int {\n\treturn compute(third)\n}\n"

    chunks = chunk_document(text, content_type="code", max_tokens=20, overlap_tokens=0)

    assert [(chunk.line_start, chunk.line_end) for chunk in chunks] == [(1, 4), (6, 8)]


def test_a_single_line_longer_than_max_tokens_is_cut_into_pieces_of_that_line():
    line = " ".join(f"word{number}" for number in range(200))
    text = f"Intro.\n\n{line}\n\nOutro."

    chunks = chunk_document(text, content_type="text", max_tokens=50, overlap_tokens=10)

    pieces = [chunk for chunk in chunks if chunk.line_start == 3]
    assert len(pieces) > 1
    assert " ".join(piece.text for piece in pieces) == line
    assert all(piece.line_end == 3 and piece.token_count <= 50 for piece in pieces)
    assert chunks[0].text == "Intro."
    assert chunks[-1].text == "Outro."


def test_a_single_huge_word_is_cut_between_characters():
    blob = "A" * 1000

    chunks = chunk_document(blob, content_type="text", max_tokens=20, overlap_tokens=0)

    assert "".join(chunk.text for chunk in chunks) == blob
    assert all(chunk.token_count <= 20 for chunk in chunks)


def test_windows_line_endings_keep_line_numbers():
    text = "# Title\r\n\r\nBody line.\r\n"

    chunks = chunk_document(text, content_type="markdown")

    assert [(chunk.text, chunk.line_start, chunk.line_end) for chunk in chunks] == [("# Title\n\nBody line.", 1, 3)]


@pytest.mark.parametrize("text", ["", "   ", "\n\n\t\n"])
def test_empty_text_has_no_chunks(text):
    assert chunk_document(text, content_type="markdown") == []


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"max_tokens": 19}, "max_tokens must be at least 20"),
        ({"overlap_tokens": -1}, "overlap_tokens must be at least 0 and less than max_tokens"),
        ({"max_tokens": 100, "overlap_tokens": 100}, "less than max_tokens"),
        ({"content_type": "docx"}, "unknown content_type 'docx'"),
    ],
)
def test_invalid_arguments_are_refused(arguments, message):
    with pytest.raises(ValueError, match=message):
        chunk_document("Some text.", **{"content_type": "text", **arguments})


FIXTURES = [
    (RUNBOOK, "markdown"),
    (RUNBOOK, "text"),
    (RUNBOOK, "code"),
    ("Title\n=====\n\nBody.\n\nSub\n---\n\n" + "Sentence number one, then two.\n" * 30, "rst"),
    ("\n\n  leading blank lines\n\n\n" + "\n".join(f"line {n} of many" for n in range(80)) + "\n\n", "text"),
]


@pytest.mark.parametrize(("text", "content_type"), FIXTURES)
@pytest.mark.parametrize(("max_tokens", "overlap_tokens"), [(25, 0), (40, 15), (400, 50)])
def test_every_chunk_is_exactly_its_line_range(text, content_type, max_tokens, overlap_tokens):
    chunks = chunk_document(text, content_type=content_type, max_tokens=max_tokens, overlap_tokens=overlap_tokens)

    assert chunks
    assert_chunks_cite_their_lines(text, chunks, max_tokens)


def random_markdown(rng: random.Random) -> str:
    words = ["alpha", "beta", "gamma", "delta", "rate", "limit", "key", "token", "x" * 30, "é", "日本語", "(a+b)"]
    lines: list[str] = []
    for _ in range(rng.randint(1, 40)):
        kind = rng.random()
        if kind < 0.15:
            lines += ["#" * rng.randint(1, 4) + " " + rng.choice(words), ""]
        elif kind < 0.25:
            lines += ["```", *(f"code {rng.choice(words)}" for _ in range(rng.randint(0, 30))), "```"]
        elif kind < 0.35:
            lines.append("")
        else:
            lines.append(" ".join(rng.choice(words) for _ in range(rng.randint(1, 50))))
    return "\n".join(lines)


def random_commonmark(rng: random.Random) -> str:
    """Markdown with setext titles, indented code, lists, blockquotes and front matter, in Chinese too."""
    words = ["alpha", "beta", "rate", "limit", "x" * 30, "用户", "指南", "配置", "(a+b)", "#", "---", "==="]
    lines: list[str] = ["---", "title: random", "---"] if rng.random() < 0.2 else []
    for _ in range(rng.randint(1, 40)):
        kind = rng.random()
        text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 12)))
        if kind < 0.15:
            lines += [text, rng.choice(["=", "-"]) * rng.randint(1, 8), ""]
        elif kind < 0.25:
            lines += ["#" * rng.randint(1, 4) + " " + text, ""]
        elif kind < 0.35:
            lines += [*(f"    {rng.choice(['# comment', 'code()', ''])}" for _ in range(rng.randint(1, 12))), ""]
        elif kind < 0.45:
            lines += [rng.choice(["```", "~~~~"]), *(rng.choice(words) for _ in range(rng.randint(0, 20)))]
            lines += [rng.choice(["```", "~~~~", ""])]
        elif kind < 0.55:
            lines += [
                f"{rng.choice(['-', '1.', '>'])} {rng.choice(['', '# ', '## '])}{text}",
                rng.choice(["", "  ---"]),
            ]
        elif kind < 0.6:
            lines.append(rng.choice(["", "---", "***"]))
        else:
            lines.append(text)
    return "\n".join(lines)


def assert_random_chunks_hold(text: str, chunks: list[Chunk], max_tokens: int, may_be_left_out) -> None:
    for chunk in chunks:
        assert chunk.text.strip()
        assert chunk.token_count <= max_tokens
        if chunk.line_start == chunk.line_end and chunk.text != cited_lines(text, chunk):
            assert chunk.text in cited_lines(text, chunk)  # a piece of a line too long for one chunk
        else:
            assert chunk.text == cited_lines(text, chunk)
    assert [chunk.line_start for chunk in chunks] == sorted(chunk.line_start for chunk in chunks)
    covered = {line for chunk in chunks for line in range(chunk.line_start, chunk.line_end + 1)}
    lines = text.split("\n")
    for number, line in enumerate(lines, start=1):
        # Only a heading with no text of its own may be left out: it lives on in its subsections' heading path.
        if line.strip() and not may_be_left_out(lines, number - 1):
            assert number in covered


def test_random_documents_keep_every_chunk_within_budget_and_line_range():
    rng = random.Random(20240607)
    for _ in range(150):
        text = random_markdown(rng)
        max_tokens = rng.randint(20, 120)
        overlap_tokens = rng.randint(0, max_tokens - 1)
        content_type = rng.choice(["markdown", "text", "code"])

        chunks = chunk_document(text, content_type=content_type, max_tokens=max_tokens, overlap_tokens=overlap_tokens)

        assert_random_chunks_hold(text, chunks, max_tokens, is_atx_line if content_type == "markdown" else never)


def never(lines: list[str], index: int) -> bool:
    return False


def is_atx_line(lines: list[str], index: int) -> bool:
    return lines[index].startswith("#")


def is_setext_underline(line: str) -> bool:
    characters = set(line.strip())
    return characters == {"="} or characters == {"-"}


def may_be_a_bare_heading(lines: list[str], index: int) -> bool:
    """A "#" line, or a line of a run of text lines that ends with a setext underline."""
    if is_atx_line(lines, index):
        return True
    for line in lines[index:]:
        if is_setext_underline(line):
            return True
        if not line.strip():
            return False
    return False


def test_random_commonmark_documents_keep_every_chunk_within_budget_and_line_range():
    rng = random.Random(20260601)
    for _ in range(200):
        text = random_commonmark(rng)
        max_tokens = rng.randint(20, 120)
        overlap_tokens = rng.randint(0, max_tokens - 1)
        content_type = rng.choice(["markdown", "html"])

        chunks = chunk_document(text, content_type=content_type, max_tokens=max_tokens, overlap_tokens=overlap_tokens)

        assert_random_chunks_hold(text, chunks, max_tokens, may_be_a_bare_heading)
        title = first_heading(text, content_type=content_type)
        first_path = next((chunk.heading_path for chunk in chunks if chunk.heading_path), "")
        assert first_path.startswith(title)
        assert bool(title) == bool(first_path)
