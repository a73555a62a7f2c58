import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("ai", "0003_embeddingcache_empty"),
        ("tenancy", "0002_tenant_without_own_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="embeddingcache",
            name="tenant",
            # The table is empty (0003): the default only satisfies ADD COLUMN ... NOT NULL and is dropped at once.
            field=models.ForeignKey(
                db_index=False,
                default=0,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="tenancy.tenant",
            ),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="embeddingcache",
            name="user_id",
            field=models.CharField(blank=True, default="", max_length=255),
            preserve_default=False,
        ),
        migrations.AddConstraint(
            model_name="embeddingcache",
            constraint=models.UniqueConstraint(
                fields=("tenant", "user_id", "model", "text_hash"), name="embeddingcache_unique_owner_text"
            ),
        ),
    ]
