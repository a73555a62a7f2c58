-- How kb_kbtermfrequency (KBTermFrequency) follows kb_kbchunk. Loaded whole by migration kb 0012 (and by any later
-- one that changes it): this file is what the database runs.
--
-- Per tenant, the chunks holding each lexeme, and under lexeme '' the tenant's chunks (BM25's N). Statement-level
-- triggers with transition tables, so a bulk insert (COPY included) is one statement here. One statement applies a
-- change: the net count per (tenant, lexeme), upserted in (tenant, lexeme) order. The '' row sorts first and every
-- change of a tenant's chunks writes it (with a delta of 0 too), so it is the tenant's lock: writers of one tenant's
-- chunks queue there, never holding lexemes in different orders. A decrement whose row is gone (the tenant's rows
-- deleted first, as when the tenant itself is deleted) is dropped.

CREATE OR REPLACE FUNCTION kb_term_frequency_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO kb_kbtermfrequency AS f (tenant_id, lexeme, chunks)
    SELECT tenant_id, lexeme, delta FROM (
        SELECT tenant_id, lexeme, count(*)::int AS delta
        FROM added_chunks, unnest(tsvector_to_array(added_chunks.search_vector) || ''::text) AS lexeme
        GROUP BY tenant_id, lexeme
    ) d
    ORDER BY tenant_id, lexeme
    ON CONFLICT (tenant_id, lexeme) DO UPDATE SET chunks = f.chunks + EXCLUDED.chunks;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION kb_term_frequency_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO kb_kbtermfrequency AS f (tenant_id, lexeme, chunks)
    SELECT tenant_id, lexeme, delta FROM (
        SELECT tenant_id, lexeme, sum(delta)::int AS delta FROM (
            SELECT n.tenant_id, lexeme, 1 AS delta
            FROM old_chunks o JOIN new_chunks n ON n.id = o.id,
                unnest(tsvector_to_array(n.search_vector) || ''::text) AS lexeme
            WHERE (o.tenant_id, o.search_vector) IS DISTINCT FROM (n.tenant_id, n.search_vector)
            UNION ALL
            SELECT o.tenant_id, lexeme, -1 AS delta
            FROM old_chunks o JOIN new_chunks n ON n.id = o.id,
                unnest(tsvector_to_array(o.search_vector) || ''::text) AS lexeme
            WHERE (o.tenant_id, o.search_vector) IS DISTINCT FROM (n.tenant_id, n.search_vector)
        ) changes
        GROUP BY tenant_id, lexeme
    ) d
    WHERE delta > 0 OR ((delta < 0 OR lexeme = '') AND EXISTS (
        SELECT FROM kb_kbtermfrequency e WHERE e.tenant_id = d.tenant_id AND e.lexeme = d.lexeme
    ))
    ORDER BY tenant_id, lexeme
    ON CONFLICT (tenant_id, lexeme) DO UPDATE SET chunks = f.chunks + EXCLUDED.chunks;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION kb_term_frequency_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO kb_kbtermfrequency AS f (tenant_id, lexeme, chunks)
    SELECT tenant_id, lexeme, delta FROM (
        SELECT tenant_id, lexeme, -count(*)::int AS delta
        FROM removed_chunks, unnest(tsvector_to_array(removed_chunks.search_vector) || ''::text) AS lexeme
        GROUP BY tenant_id, lexeme
    ) d
    WHERE EXISTS (SELECT FROM kb_kbtermfrequency e WHERE e.tenant_id = d.tenant_id AND e.lexeme = d.lexeme)
    ORDER BY tenant_id, lexeme
    ON CONFLICT (tenant_id, lexeme) DO UPDATE SET chunks = f.chunks + EXCLUDED.chunks;
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS kb_term_frequency_inserted ON kb_kbchunk;
CREATE TRIGGER kb_term_frequency_inserted AFTER INSERT ON kb_kbchunk
    REFERENCING NEW TABLE AS added_chunks FOR EACH STATEMENT EXECUTE FUNCTION kb_term_frequency_inserted();
DROP TRIGGER IF EXISTS kb_term_frequency_updated ON kb_kbchunk;
CREATE TRIGGER kb_term_frequency_updated AFTER UPDATE ON kb_kbchunk
    REFERENCING OLD TABLE AS old_chunks NEW TABLE AS new_chunks FOR EACH STATEMENT
    EXECUTE FUNCTION kb_term_frequency_updated();
DROP TRIGGER IF EXISTS kb_term_frequency_deleted ON kb_kbchunk;
CREATE TRIGGER kb_term_frequency_deleted AFTER DELETE ON kb_kbchunk
    REFERENCING OLD TABLE AS removed_chunks FOR EACH STATEMENT EXECUTE FUNCTION kb_term_frequency_deleted();


-- The counts made afresh from kb_kbchunk: what a database whose triggers were missing needs, and a repair should
-- they ever disagree with the chunks.
CREATE OR REPLACE FUNCTION kb_term_frequency_rebuild() RETURNS void LANGUAGE sql AS $$
    LOCK TABLE kb_kbchunk IN SHARE MODE;
    DELETE FROM kb_kbtermfrequency;
    INSERT INTO kb_kbtermfrequency (tenant_id, lexeme, chunks)
    SELECT tenant_id, lexeme, count(*)
    FROM kb_kbchunk, unnest(tsvector_to_array(search_vector) || ''::text) AS lexeme
    GROUP BY tenant_id, lexeme;
$$;
