import importlib

from django.db import migrations

# An UPDATE of facts_fact that changes none of the columns the entries copy (a usage count, a review timestamp)
# returns before the trigger's two statements on facts_factsearchentry: they wrote nothing then, but each still fired
# the entries' statement-level triggers (FactSearchCount's), 0.1 ms of every /context's usage count.
SEARCH_ENTRY = importlib.import_module("facts.migrations.0013_fact_search_entry")
COPIED = SEARCH_ENTRY.COPIED.split(", ")
BEFORE = (
    "CREATE OR REPLACE FUNCTION facts_search_entry_updated()"
    + (SEARCH_ENTRY.TRIGGERS.split("CREATE FUNCTION facts_search_entry_updated()")[1].split("CREATE FUNCTION")[0])
)
UNCHANGED_RETURNS = f"""BEGIN
    IF NOT EXISTS (
        SELECT FROM old_facts o JOIN new_facts n ON n.id = o.id
        WHERE ({", ".join(f"o.{column}" for column in COPIED)}) IS DISTINCT FROM ({", ".join(f"n.{column}" for column in COPIED)})
    ) THEN
        RETURN NULL;
    END IF;"""
AFTER = BEFORE.replace("BEGIN", UNCHANGED_RETURNS, 1)


class Migration(migrations.Migration):
    dependencies = [
        ("facts", "0016_search_keywords_without_pending_list"),
    ]

    operations = [
        migrations.RunSQL(AFTER, BEFORE),
    ]
