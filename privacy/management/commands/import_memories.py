import sys
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from privacy.imports import UserImportReport, memories_import

from ._tenants import tenant_named

ACTOR = "command:import_memories"
SHOWN_PROBLEMS = 20


class Command(BaseCommand):
    help = (
        "Import memories from a file (docs/export-import.md): an export of this service (export_memories, or the "
        "API's .../export) or Mem0 memories. The whole file is checked first: nothing is imported from a file with "
        "a bad line. Then each user's part is imported in one transaction (all or nothing per user)."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", help="The JSON Lines (or JSON) file; - reads standard input.")
        parser.add_argument("--tenant", required=True, help="The tenant's name (or id).")
        parser.add_argument(
            "--user",
            help="Import everything into this user id (whatever the file names); default: the users the file names "
            "(its header lines, or each Mem0 memory's user_id).",
        )

    def handle(self, *args, file: str, tenant: str, user: str | None, **options):
        scope = tenant_named(tenant)
        try:
            data = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
        except OSError as exc:
            raise CommandError(f"Cannot read {file}: {exc.strerror}.") from None
        try:
            report = memories_import(tenant=scope, data=data, user_id=user, actor=ACTOR, on_user=self._user_done)
        except ValidationError as exc:
            raise CommandError(_problems(exc)) from None
        totals = {kind: report.total(kind) for kind in ("facts", "episodes", "conflicts")}
        self.stdout.write(
            f"{report.lines} line(s) in {report.format} format, {len(report.users)} user(s): " + _counts(totals)
        )

    def _user_done(self, user: UserImportReport) -> None:
        waiting = f" ({user.embedding_pending} awaiting their vector)" if user.embedding_pending else ""
        counts = _counts({"facts": user.facts, "episodes": user.episodes, "conflicts": user.conflicts})
        self.stdout.write(f"{user.user_id}: {counts}{waiting}")


def _counts(kinds: dict) -> str:
    return "; ".join(
        f"{kind} " + ", ".join(f"{count} {name}" for name, count in counts.items()) for kind, counts in kinds.items()
    )


def _problems(exc: ValidationError) -> str:
    """Every problem on its own line, by line number: the file is fixed in one go."""
    problems = [f"{where}: {message}" for where, messages in exc.message_dict.items() for message in messages]
    more = len(problems) - SHOWN_PROBLEMS
    shown = problems[:SHOWN_PROBLEMS] + ([f"... and {more} more"] if more > 0 else [])
    return "Nothing was imported; the file has problems:\n" + "\n".join(shown)
