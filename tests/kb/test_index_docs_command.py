"""`manage.py index_docs`: index trees of files, re-index incrementally, prune, report failures and errors."""

import io
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from ai.embedders import HashEmbedder
from kb.models import Document, KBChunk
from kb.selectors import document_by_doc_id, document_chunks
from tests.factories import make_tenant
from tests.fake_openai import Failure
from tests.kb.test_loaders import minimal_pdf

GUIDE = """\
# Guide

Intro text for the guide.

## Rate limits

Each key may send 100 requests per minute.
Bursts of 20 are absorbed.

## Support

Write to ops at example.com.
"""
PAGE = "<html><head><title>Status page</title></head><body><h1>Status</h1><p>All systems normal.</p></body></html>"
APP = """\
def greet(name):
    return f"hello {name}"


def part(name):
    return f"bye {name}"
"""
INDEXED = {"guide.md", "page.html", "src/app.py", "manual.pdf"}


@dataclass(frozen=True)
class Outcome:
    exit_code: int
    stdout: str
    stderr: str


def index_docs(*args: str) -> Outcome:
    stdout, stderr = io.StringIO(), io.StringIO()
    try:
        call_command("index_docs", *args, stdout=stdout, stderr=stderr)
    except CommandError as error:
        stderr.write(f"CommandError: {error}\n")
        return Outcome(error.returncode, stdout.getvalue(), stderr.getvalue())
    return Outcome(0, stdout.getvalue(), stderr.getvalue())


def summary(outcome: Outcome) -> dict[str, str]:
    """The summary table as {label: value}."""
    rows = [line.rsplit(maxsplit=1) for line in outcome.stdout.splitlines() if line[:1].isalpha() and "  " in line]
    return {label.strip(): value for label, value in rows}


def counts(outcome: Outcome, *labels: str) -> tuple[int, ...]:
    table = summary(outcome)
    return tuple(int(table[label]) for label in labels)


def doc_ids(tenant) -> set[str]:
    return set(Document.objects.filter(tenant=tenant).values_list("doc_id", flat=True))


@pytest.fixture
def docs(tmp_path) -> Path:
    """A tree with Markdown, HTML, Python, PDF, a file of invalid UTF-8, and files the walk must skip."""
    root = tmp_path / "docs"
    (root / "src").mkdir(parents=True)
    (root / "guide.md").write_text(GUIDE)
    (root / "page.html").write_text(PAGE)
    (root / "src" / "app.py").write_text(APP)
    (root / "manual.pdf").write_bytes(minimal_pdf([["Operator manual", "Restart the worker nightly."]]))
    (root / "broken.md").write_bytes(b"# Broken\n\ncaf\xe9\n")
    for skipped in [".hidden/secret.md", "node_modules/lib/readme.md", "src/__pycache__/app.md", ".notes.md"]:
        (root / skipped).parent.mkdir(parents=True, exist_ok=True)
        (root / skipped).write_text("# Skipped\n")
    (root / "image.png").write_bytes(b"\x89PNG")
    (root / "LICENSE").write_text("MIT\n")
    return root


@pytest.fixture
def clean_docs(docs) -> Path:
    (docs / "broken.md").unlink()
    return docs


@pytest.fixture
def embed_calls(monkeypatch):
    calls: list[list[str]] = []
    embed = HashEmbedder.embed

    def counting_embed(self, texts):
        calls.append(list(texts))
        return embed(self, texts)

    monkeypatch.setattr(HashEmbedder, "embed", counting_embed)
    return calls


def test_a_tree_is_indexed_and_the_bad_file_is_reported_by_name_with_its_reason(tenant, docs):
    outcome = index_docs(str(docs), "--tenant", "acme")

    assert outcome.exit_code == 1
    assert f"failed: {docs / 'broken.md'}: not valid UTF-8 (byte 0xe9 at offset 13)" in outcome.stderr
    assert "1 file(s) could not be indexed" in outcome.stderr
    assert counts(outcome, "new", "changed", "unchanged", "removed", "failed") == (4, 0, 0, 0, 1)
    assert int(summary(outcome)["chunks written"]) == KBChunk.objects.filter(tenant=tenant).count()
    assert "seconds" in summary(outcome)
    assert doc_ids(tenant) == INDEXED


def test_indexed_files_keep_their_structure_and_source(tenant, clean_docs):
    index_docs(str(clean_docs), "--tenant", "acme")

    guide = document_by_doc_id(tenant=tenant, doc_id="guide.md")
    section = document_chunks(tenant=tenant, document=guide).get(heading_path="Guide > Rate limits")
    assert (section.line_start, section.line_end) == (5, 8)
    assert section.text == "## Rate limits\n\nEach key may send 100 requests per minute.\nBursts of 20 are absorbed."
    assert (guide.title, guide.content_type, guide.source_path) == ("Guide", "markdown", str(clean_docs / "guide.md"))
    page = document_by_doc_id(tenant=tenant, doc_id="page.html")
    assert [c.heading_path for c in document_chunks(tenant=tenant, document=page)] == ["Status"]
    app = document_by_doc_id(tenant=tenant, doc_id="src/app.py")
    assert (app.content_type, app.metadata["language"]) == ("code", "python")
    assert [(c.line_start, c.line_end) for c in document_chunks(tenant=tenant, document=app)] == [(1, 6)]
    manual = document_by_doc_id(tenant=tenant, doc_id="manual.pdf")
    assert "Restart the worker nightly." in document_chunks(tenant=tenant, document=manual).get().text


def test_a_second_run_finds_everything_unchanged_and_embeds_nothing(tenant, clean_docs, embed_calls):
    index_docs(str(clean_docs), "--tenant", "acme")
    chunk_ids = set(KBChunk.objects.filter(tenant=tenant).values_list("pk", flat=True))
    embed_calls.clear()

    outcome = index_docs(str(clean_docs), "--tenant", "acme")

    assert outcome.exit_code == 0
    assert counts(outcome, "new", "changed", "unchanged", "chunks written") == (0, 0, 4, 0)
    assert embed_calls == []
    assert set(KBChunk.objects.filter(tenant=tenant).values_list("pk", flat=True)) == chunk_ids


def test_editing_one_file_reindexes_it_alone_and_embeds_only_its_changed_chunk(
    tenant, clean_docs, openai_settings, fake_openai
):
    index_docs(str(clean_docs), "--tenant", "acme")
    others = set(
        KBChunk.objects.filter(tenant=tenant).exclude(document__doc_id="guide.md").values_list("pk", flat=True)
    )
    (clean_docs / "guide.md").write_text(GUIDE.replace("Write to ops", "Write to the on-call engineer"))
    fake_openai.requests.clear()

    outcome = index_docs(str(clean_docs), "--tenant", "acme")

    assert counts(outcome, "new", "changed", "unchanged", "chunks written") == (0, 1, 3, 3)
    sent = [text for request in fake_openai.requests_to("/v1/embeddings") for text in request["body"]["input"]]
    assert sent == ["## Support\n\nWrite to the on-call engineer at example.com."]
    assert (
        set(KBChunk.objects.filter(tenant=tenant).exclude(document__doc_id="guide.md").values_list("pk", flat=True))
        == others
    )


def test_prune_removes_a_deleted_files_document_and_nothing_else(tenant, clean_docs, tmp_path):
    other_root = tmp_path / "wiki"
    other_root.mkdir()
    (other_root / "team.md").write_text("# Team\n\nWho is who.\n")
    globex = make_tenant("globex")[0]
    index_docs(str(clean_docs), str(other_root), "--tenant", "acme")
    index_docs(str(clean_docs), "--tenant", "globex")
    index_docs(str(clean_docs / "guide.md"), "--tenant", "acme", "--doc-id", "uploaded-guide")
    (clean_docs / "src" / "app.py").unlink()

    # manual.pdf is filtered out of this run but still exists: only a file that is gone counts as removed.
    outcome = index_docs(str(clean_docs), "--tenant", "acme", "--prune", "--exclude", "*.pdf")

    assert outcome.exit_code == 0
    assert "removed: src/app.py" in outcome.stdout
    assert counts(outcome, "unchanged", "removed") == (2, 1)
    assert doc_ids(tenant) == INDEXED - {"src/app.py"} | {"team.md", "uploaded-guide"}
    assert doc_ids(globex) == INDEXED


def test_prune_of_one_tenant_never_touches_another_with_the_same_doc_ids(tenant, clean_docs):
    globex = make_tenant("globex")[0]
    index_docs(str(clean_docs), "--tenant", "acme")
    index_docs(str(clean_docs), "--tenant", "globex")
    (clean_docs / "page.html").unlink()

    index_docs(str(clean_docs), "--tenant", "acme", "--prune")

    assert doc_ids(tenant) == INDEXED - {"page.html"}
    assert doc_ids(globex) == INDEXED
    assert Document.objects.filter(doc_id="guide.md").count() == 2


def test_a_dry_run_reports_what_would_happen_and_writes_and_embeds_nothing(tenant, clean_docs, embed_calls):
    index_docs(str(clean_docs), "--tenant", "acme")
    (clean_docs / "guide.md").write_text(GUIDE + "\nMore.\n")
    (clean_docs / "new.md").write_text("# New\n")
    (clean_docs / "page.html").unlink()
    before = list(KBChunk.objects.filter(tenant=tenant).values_list("pk", "text").order_by("pk"))
    embed_calls.clear()

    outcome = index_docs(str(clean_docs), "--tenant", "acme", "--prune", "--dry-run")

    assert outcome.exit_code == 0
    assert "Dry run: nothing was written." in outcome.stdout
    assert "would remove: page.html" in outcome.stdout
    labels = ("would be new", "would be changed", "unchanged", "would be removed")
    assert counts(outcome, *labels) == (1, 1, 2, 1)
    assert embed_calls == []
    assert list(KBChunk.objects.filter(tenant=tenant).values_list("pk", "text").order_by("pk")) == before
    assert doc_ids(tenant) == INDEXED


def test_include_and_exclude_globs_select_files(tenant, clean_docs):
    outcome = index_docs(str(clean_docs), "--tenant", "acme", "--include", "*.md", "--include", "LICENSE")
    assert doc_ids(tenant) == {"guide.md", "LICENSE"}

    outcome = index_docs(str(clean_docs), "--tenant", "acme", "--exclude", "src", "--exclude", "*.pdf")
    assert outcome.exit_code == 0
    assert doc_ids(tenant) == {"guide.md", "LICENSE", "page.html"}


def test_a_single_file_is_indexed_under_its_name_or_the_given_doc_id(tenant, clean_docs):
    index_docs(str(clean_docs / "src" / "app.py"), "--tenant", "acme")
    outcome = index_docs(str(clean_docs / "guide.md"), "--tenant", "acme", "--doc-id", "runbooks/guide")

    assert outcome.exit_code == 0
    assert doc_ids(tenant) == {"app.py", "runbooks/guide"}
    assert document_by_doc_id(tenant=tenant, doc_id="runbooks/guide").source_path == str(clean_docs / "guide.md")


def test_two_roots_giving_the_same_doc_id_index_the_first_and_report_the_second(tenant, clean_docs, tmp_path):
    other_root = tmp_path / "wiki"
    other_root.mkdir()
    (other_root / "guide.md").write_text("# Another guide\n")

    outcome = index_docs(str(clean_docs), str(other_root), "--tenant", "acme")

    assert outcome.exit_code == 1
    assert f"failed: {other_root / 'guide.md'}: doc id 'guide.md' already comes from {clean_docs / 'guide.md'}" in (
        outcome.stderr
    )
    assert document_by_doc_id(tenant=tenant, doc_id="guide.md").title == "Guide"


def test_an_embedding_provider_failure_stops_the_run_with_its_reason(tenant, clean_docs, openai_settings, fake_openai):
    fake_openai.fail_next(Failure(status=401))

    outcome = index_docs(str(clean_docs), "--tenant", "acme")

    assert outcome.exit_code == 1
    assert outcome.stderr.strip().splitlines()[-1].startswith("CommandError: ")
    assert not Document.objects.filter(tenant=tenant, doc_id="guide.md").exists()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["{docs}", "--tenant", "nobody"], "No tenant named 'nobody'."),
        (["{docs}/missing.md", "--tenant", "acme"], "No such file or directory: {docs}/missing.md"),
        (["{docs}", "--tenant", "acme", "--doc-id", "x"], "--doc-id needs exactly one file argument"),
        (["{docs}/guide.md", "{docs}/page.html", "--tenant", "acme", "--doc-id", "x"], "--doc-id needs exactly one"),
        (["{docs}/guide.md", "--tenant", "acme", "--prune"], "--prune needs at least one directory argument."),
        (["{docs}", "--tenant", "acme", "--max-tokens", "5"], "--max-tokens must be at least 20."),
        (["{docs}", "--tenant", "acme", "--overlap", "400"], "--overlap must be at least 0 and less than"),
    ],
)
def test_bad_arguments_fail_with_one_line_naming_the_problem(tenant, clean_docs, arguments, message):
    outcome = index_docs(*(argument.format(docs=clean_docs) for argument in arguments))

    assert outcome.exit_code == 1
    assert f"CommandError: {message.format(docs=clean_docs)}" in outcome.stderr
    assert not Document.objects.exists()
