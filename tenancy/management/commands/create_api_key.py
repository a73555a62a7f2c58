from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from tenancy.scopes import ALL_SCOPES, DEFAULT_SCOPES
from tenancy.selectors import tenant_get_by_name
from tenancy.services import api_key_create


class Command(BaseCommand):
    help = "Issue another API key for an existing tenant and print it (shown once)."

    def add_arguments(self, parser):
        parser.add_argument("tenant", help="The tenant's name.")
        parser.add_argument("--name", default="", help="A label to tell keys apart, e.g. 'staging agent'.")
        parser.add_argument(
            "--scopes",
            default=",".join(DEFAULT_SCOPES),
            help=f"What the key may do, comma-separated, among {', '.join(ALL_SCOPES)} (default: %(default)s).",
        )

    def handle(self, *args, tenant: str, name: str, scopes: str, **options):
        found = tenant_get_by_name(name=tenant)
        if found is None:
            raise CommandError(f"No tenant named {tenant!r}. Create it with: manage.py create_tenant {tenant}")
        try:
            issued = api_key_create(tenant=found, name=name, scopes=scopes)
        except ValidationError as error:
            raise CommandError(f"--scopes: {' '.join(error.messages)}") from None
        self.stdout.write(
            f"New API key for {found.name!r} with scopes {','.join(issued.api_key.scopes)} "
            "(copy it now, it is not shown again):"
        )
        self.stdout.write(issued.key)
