import time

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from core.errors import ApplicationError
from core.progress import Progress
from kb.services import IndexRun, documents_index_plan, index_plan_build
from tenancy.selectors import tenant_get_by_name

OPTIONS = {"max_tokens": "--max-tokens", "overlap_tokens": "--overlap"}


class Command(BaseCommand):
    help = (
        "Index files and directory trees into a tenant's knowledge base. Unchanged files cost nothing; a changed "
        "file is re-chunked and only its new chunk texts are embedded. Exits non-zero if any file failed."
    )

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", metavar="PATH", help="Files and directories (searched recursively).")
        parser.add_argument("--tenant", required=True, help="The tenant's name.")
        parser.add_argument(
            "--include",
            action="append",
            default=[],
            metavar="GLOB",
            help="Only directory files whose relative path or name matches (repeatable; default: supported types).",
        )
        parser.add_argument(
            "--exclude",
            action="append",
            default=[],
            metavar="GLOB",
            help="Skip directory files and subdirectories whose relative path or name matches (repeatable).",
        )
        parser.add_argument("--doc-id", help="Doc id for a single file argument (default: its file name).")
        parser.add_argument("--max-tokens", type=int, default=400, help="Largest chunk, in estimated tokens.")
        parser.add_argument("--overlap", type=int, default=50, help="Tokens a chunk repeats from the previous one.")
        parser.add_argument(
            "--prune",
            action="store_true",
            help="Delete the tenant's documents indexed from files under the given directories that no longer "
            "exist. Documents of files that still exist (even if now filtered out) and of other paths are kept.",
        )
        parser.add_argument("--dry-run", action="store_true", help="Report what would change; write nothing.")

    def handle(self, *args, paths, tenant, include, exclude, doc_id, max_tokens, overlap, prune, dry_run, **options):
        scope = tenant_get_by_name(name=tenant)
        if scope is None:
            raise CommandError(f"No tenant named {tenant!r}.")
        started = time.monotonic()
        try:
            plan = index_plan_build(paths=paths, include=include, exclude=exclude, doc_id=doc_id)
            progress = Progress(len(plan.sources), f"Indexing into {tenant}", stream=self.stderr._out)
            run = documents_index_plan(
                tenant=scope,
                plan=plan,
                max_tokens=max_tokens,
                overlap_tokens=overlap,
                prune=prune,
                dry_run=dry_run,
                on_source=progress.advance,
            )
        except ApplicationError as exc:  # bad arguments, or the embedding provider failed for good
            raise CommandError(exc.message) from None
        except ValidationError as exc:  # chunking parameters
            raise CommandError(_as_options(exc)) from None
        progress.close()
        for failure in run.failures:
            self.stderr.write(f"failed: {failure.path}: {failure.reason}")
        for removed in run.removed:
            self.stdout.write(f"{'would remove' if dry_run else 'removed'}: {removed}")
        self.stdout.write(summary(run, seconds=time.monotonic() - started))
        if run.failures:
            raise CommandError(f"{len(run.failures)} file(s) could not be indexed (see above).")


def _as_options(error: ValidationError) -> str:
    """The service's message, naming the command's options: "--overlap must be at least 0 and less than ..."."""
    name, [message] = next(iter(error.message_dict.items()))
    for parameter, option in OPTIONS.items():
        message = message.replace(parameter, option)
    return f"{OPTIONS.get(name, name)} {message[0].lower()}{message[1:]}"


def summary(run: IndexRun, *, seconds: float) -> str:
    """The outcome counts as a two-column table; a dry run says what "would be" done."""
    would = "would be " if run.dry_run else ""
    rows = [
        (f"{would}new", str(run.count("new"))),
        (f"{would}changed", str(run.count("changed"))),
        ("unchanged", str(run.count("unchanged"))),
        (f"{would}removed", str(len(run.removed))),
        ("failed", str(len(run.failures))),
        ("chunks that would be written" if run.dry_run else "chunks written", str(run.chunks)),
        ("seconds", f"{seconds:.1f}"),
    ]
    label_width = max(len(label) for label, _ in rows)
    value_width = max(len(value) for _, value in rows)
    lines = ["Dry run: nothing was written."] if run.dry_run else []
    lines += [f"{label:<{label_width}}  {value:>{value_width}}" for label, value in rows]
    return "\n".join(lines)
