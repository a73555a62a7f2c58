from django.core.management.base import BaseCommand, CommandError

from forgetting.services import forget_policy_apply
from tenancy.selectors import tenant_get_by_name, tenants_active

COLUMNS = [
    ("tenant", "{:<24}"),
    ("status", "{:<8}"),
    ("archived", "{:>9}"),
    ("evicted", "{:>8}"),
    ("purged", "{:>8}"),
    ("of which superseded", "{:>20}"),
    ("seconds", "{:>8}"),
]


class Command(BaseCommand):
    help = (
        "Apply the forget policy now: archive unused facts and facts over the per-user cap, purge archived and "
        "superseded facts past retention. Prints a table of what went (or, with --dry-run, what would go)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--tenant", help="Only this tenant (by name); default: every active tenant.")
        parser.add_argument("--dry-run", action="store_true", help="Count only; change nothing.")

    def handle(self, *args, tenant: str | None, dry_run: bool, **options):
        if tenant:
            scope = tenant_get_by_name(name=tenant)
            if scope is None:
                raise CommandError(f"No tenant named {tenant!r}.")
            tenants = [scope]
        else:
            tenants = list(tenants_active())
        self.stdout.write(("Dry run: nothing is changed.\n" if dry_run else "") + self._row([c for c, _ in COLUMNS]))
        totals = [0, 0, 0, 0]
        for scope in tenants:
            report = forget_policy_apply(tenant=scope, dry_run=dry_run)
            counts = [report.archived, report.evicted, report.purged, report.superseded_purged]
            totals = [total + count for total, count in zip(totals, counts, strict=True)]
            self.stdout.write(self._row([scope.name[:24], report.status, *counts, f"{report.duration_ms / 1000:.2f}"]))
        if len(tenants) > 1:
            self.stdout.write(self._row(["total", "", *totals, ""]))

    def _row(self, values) -> str:
        return "  ".join(fmt.format(value) for (_, fmt), value in zip(COLUMNS, values, strict=True)).rstrip()
