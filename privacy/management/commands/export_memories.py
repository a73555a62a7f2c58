from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from privacy.exports import tenant_export_lines, user_export_lines

from ._tenants import tenant_named


class Command(BaseCommand):
    help = (
        "Export a tenant's memories as JSON Lines (docs/export-import.md): one user's, or every user's one after the "
        "other (each its header line, then its episodes, facts with their history, and conflicts)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--tenant", required=True, help="The tenant's name (or id).")
        parser.add_argument("--user", help="Only this user id; default: every user of the tenant.")
        parser.add_argument("--output", help="Write to this file; default: standard output.")

    def handle(self, *args, tenant: str, user: str | None, output: str | None, **options):
        scope = tenant_named(tenant)
        try:
            lines = user_export_lines(tenant=scope, user_id=user) if user else tenant_export_lines(tenant=scope)
        except ValidationError as exc:
            raise CommandError(f"--user: {exc.messages[0]}") from None
        if not output:
            for line in lines:
                self.stdout.write(line, ending="")
            return
        written = 0
        with open(output, "w", encoding="utf-8") as stream:
            for line in lines:
                stream.write(line)
                written += 1
        self.stderr.write(f"{written} line(s) written to {output}")
