from django.db import migrations


class Migration(migrations.Migration):
    """Once the entries' update trigger learned to skip an update of no copied column here; that trigger is now
    defined in facts/sql/search_upkeep.sql (migration 0021), with the skip."""

    dependencies = [
        ("facts", "0016_search_keywords_without_pending_list"),
    ]

    operations = []
