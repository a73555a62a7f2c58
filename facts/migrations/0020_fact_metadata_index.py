from django.contrib.postgres.indexes import GinIndex
from django.db import migrations


class Migration(migrations.Migration):
    """Filters on metadata: an equality in search.filters goes with a containment (@>) that this index answers."""

    dependencies = [
        ("facts", "0019_fact_hold_reason"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="fact",
            index=GinIndex(fields=["metadata"], opclasses=["jsonb_path_ops"], name="fact_metadata"),
        ),
    ]
