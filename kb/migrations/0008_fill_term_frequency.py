from django.db import migrations

# The counts of the chunks indexed before the triggers of 0007, counted afresh under a lock that holds writers
# back (one that wrote between the two migrations was counted by the triggers already).
FILL = """
LOCK TABLE kb_kbchunk IN SHARE MODE;
DELETE FROM kb_kbtermfrequency;
INSERT INTO kb_kbtermfrequency (tenant_id, lexeme, chunks)
SELECT tenant_id, lexeme, count(*)
FROM kb_kbchunk, unnest(tsvector_to_array(search_vector) || ''::text) AS lexeme
GROUP BY tenant_id, lexeme
"""


class Migration(migrations.Migration):

    dependencies = [
        ("kb", "0007_term_frequency"),
    ]

    operations = [
        migrations.RunSQL(FILL, "DELETE FROM kb_kbtermfrequency"),
    ]
