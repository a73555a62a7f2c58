import django.contrib.postgres.fields
from django.db import migrations, models

import tenancy.scopes


def scopes_field(default):
    return django.contrib.postgres.fields.ArrayField(
        base_field=models.CharField(
            choices=[("memory:read", "memory:read"), ("memory:write", "memory:write"), ("review", "review"), ("admin", "admin")],
            max_length=20,
        ),
        default=default,
        size=None,
    )


class Migration(migrations.Migration):
    """Keys issued before scopes existed could do everything: they keep every scope (the column's first default).
    Keys issued from now on default to read and write."""

    dependencies = [
        ("tenancy", "0002_tenant_without_own_index"),
    ]

    operations = [
        migrations.AddField(model_name="apikey", name="scopes", field=scopes_field(tenancy.scopes.all_scopes)),
        migrations.AlterField(model_name="apikey", name="scopes", field=scopes_field(tenancy.scopes.default_scopes)),
    ]
