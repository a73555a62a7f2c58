# The forget policy and runs moved here from the facts app. Their tables stay as they are (state only); the
# next migration gives them this app's names.

import django.core.validators
import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("facts", "0007_rows_inline"),
        ("tenancy", "0002_tenant_without_own_index"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="ForgetPolicy",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("enabled", models.BooleanField(default=True)),
                        ("max_unused_days", models.PositiveIntegerField(blank=True, null=True, validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(36500)])),
                        ("min_usage_count", models.PositiveIntegerField(default=3)),
                        ("max_facts_per_user", models.PositiveIntegerField(blank=True, null=True, validators=[django.core.validators.MinValueValidator(1)])),
                        ("archive_retention_days", models.PositiveIntegerField(default=30, validators=[django.core.validators.MaxValueValidator(36500)])),
                        ("exempt_categories", models.JSONField(blank=True, default=list)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                        ("tenant", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name="forget_policy", to="tenancy.tenant")),
                    ],
                    options={"verbose_name_plural": "forget policies", "db_table": "facts_forgetpolicy"},
                ),
                migrations.CreateModel(
                    name="ForgetRun",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("dry_run", models.BooleanField(default=False)),
                        ("status", models.CharField(choices=[("done", "Done"), ("skipped", "Skipped"), ("failed", "Failed")], default="done", max_length=20)),
                        ("as_of", models.DateTimeField()),
                        ("archived", models.PositiveIntegerField(default=0)),
                        ("evicted", models.PositiveIntegerField(default=0)),
                        ("purged", models.PositiveIntegerField(default=0)),
                        ("superseded_purged", models.PositiveIntegerField(default=0)),
                        ("timings", models.JSONField(blank=True, default=dict)),
                        ("policy", models.JSONField(blank=True, default=dict)),
                        ("error", models.TextField(blank=True)),
                        ("started_at", models.DateTimeField(default=django.utils.timezone.now)),
                        ("duration_ms", models.PositiveIntegerField(default=0)),
                        ("tenant", models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="forget_runs", to="tenancy.tenant")),
                    ],
                    options={
                        "ordering": ["-started_at", "-id"],
                        "indexes": [models.Index(fields=["tenant", "-started_at"], name="forgetrun_tenant_started")],
                        "db_table": "facts_forgetrun",
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
