# Superseding set the old fact's valid_to to the new fact's valid_from, which could be earlier than the old fact's
# own valid_from (a new fact about an earlier time). Such a fact's validity ends where it starts: it was never true
# while stored. The next migration makes the database refuse such intervals.

from django.db import migrations

FIX = "UPDATE facts_fact SET valid_to = valid_from WHERE valid_to < valid_from"


class Migration(migrations.Migration):

    dependencies = [
        ("facts", "0009_fact_proposal_source_messages"),
    ]

    operations = [migrations.RunSQL(FIX, reverse_sql=migrations.RunSQL.noop)]
