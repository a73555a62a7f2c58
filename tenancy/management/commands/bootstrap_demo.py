import json
import os
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from tenancy.services import demo_access_ensure


class Command(BaseCommand):
    help = (
        "Ensure a demo tenant with an API key and an admin user exist (idempotent) and print how to use them. "
        "The clear key and generated password are kept in var/demo-credentials.json (mode 600)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--tenant", default=os.environ.get("DEMO_TENANT", "demo"))
        parser.add_argument("--base-url", default=os.environ.get("MEMORYPROJECT_URL", "http://127.0.0.1:8000"))

    def handle(self, *args, tenant: str, base_url: str, **options):
        credentials_file = Path(settings.BASE_DIR) / "var" / "demo-credentials.json"
        saved = json.loads(credentials_file.read_text()) if credentials_file.exists() else {}
        access, to_save = demo_access_ensure(
            tenant_name=tenant,
            admin_username=os.environ.get("DJANGO_SUPERUSER_USERNAME", "admin"),
            admin_password=os.environ.get("DJANGO_SUPERUSER_PASSWORD") or None,
            saved=saved,
        )
        credentials_file.parent.mkdir(parents=True, exist_ok=True)
        credentials_file.touch(mode=0o600)
        credentials_file.write_text(json.dumps(to_save, indent=2))

        password = access.admin_password or "(unchanged; set before, not known here)"
        self.stdout.write(
            "\n".join(
                [
                    "",
                    f"  Admin:    {base_url}/admin/   user {access.admin_username!r}, password {password}",
                    f"  API docs: {base_url}/api/docs/",
                    f"  Tenant:   {access.tenant.name}   API key: {access.api_key}",
                    f"  Try:      curl -H 'Authorization: Bearer {access.api_key}' {base_url}/api/v1/whoami",
                    f"  (saved in {credentials_file})",
                    "",
                ]
            )
        )
