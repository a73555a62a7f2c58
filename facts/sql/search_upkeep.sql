-- How the search tables follow facts_fact. Loaded whole by migration 0021 and by each later one that changes it
-- (0022: the signs; 0023: the entries partitioned by user; 0024: changed facts found once): this file is what the
-- database runs. Every trigger is statement-level with transition tables, so a bulk insert (COPY included) costs one
-- statement per table, not one per row.
--
--   facts_fact --> facts_factsearchentry (FactSearchEntry: one narrow row per current active or pending fact)
--                    |--> facts_factsearchcount (FactSearchCount: the user's entries per value of what a search
--                    |                            filters entries by)
--                    '--> facts_factsearchterm  (FactSearchTerm: the same, per lexeme)


-- The lexeme every entry carries for its user, so one GIN probe finds the user's entries holding a term
-- (facts.selectors.search_scope_lexeme computes the same in Python).
CREATE OR REPLACE FUNCTION facts_search_scope(tenant_id bigint, user_id text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT 'zs' || md5(tenant_id::text || ':' || user_id)
$$;


-- Entries: inserted with their facts; on an update, written afresh when a copied column changed (dropped when the
-- fact stopped being current and active or pending); deleted with their facts. The table is partitioned by
-- (tenant_id, user_id), so each statement names an entry by the fact and its user: one partition is read.
CREATE OR REPLACE FUNCTION facts_search_entry_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO facts_factsearchentry
        (fact_id, tenant_id, user_id, agent_id, category, status, embedding, signs, vector_model, awaiting_vector,
         keywords)
    SELECT f.id, f.tenant_id, f.user_id, f.agent_id, f.category, f.status, f.embedding::halfvec,
        binary_quantize(f.embedding::halfvec)::varbit,
        CASE WHEN f.embedding IS NULL THEN '' ELSE f.embedding_model END,
        f.embedding_pending <> '',
        f.search_vector || array_to_tsvector(ARRAY[facts_search_scope(f.tenant_id, f.user_id)])
    FROM inserted_facts f
    WHERE f.valid_to IS NULL AND f.status IN ('active', 'pending');
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION facts_search_entry_updated() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    changed bigint[];
BEGIN
    -- The facts whose copied columns changed; an update of none of them (a usage count, a review timestamp) writes
    -- nothing here, so the entries' own triggers do not fire either.
    SELECT array_agg(n.id) INTO changed
    FROM old_facts o JOIN new_facts n ON n.id = o.id
    WHERE (o.tenant_id, o.user_id, o.agent_id, o.category, o.status, o.valid_to, o.embedding, o.embedding_model,
           o.embedding_pending, o.search_vector)
        IS DISTINCT FROM (n.tenant_id, n.user_id, n.agent_id, n.category, n.status, n.valid_to, n.embedding,
           n.embedding_model, n.embedding_pending, n.search_vector);
    IF changed IS NULL THEN
        RETURN NULL;
    END IF;
    -- A changed fact's entry is written afresh: deleted by its whole key (the partition's and the fact's), and
    -- inserted again while the fact is current and active or pending, in its user's partition should that change.
    DELETE FROM facts_factsearchentry e USING old_facts o JOIN unnest(changed) AS c(id) ON c.id = o.id
    WHERE e.fact_id = o.id AND e.tenant_id = o.tenant_id AND e.user_id = o.user_id;
    INSERT INTO facts_factsearchentry
        (fact_id, tenant_id, user_id, agent_id, category, status, embedding, signs, vector_model, awaiting_vector,
         keywords)
    SELECT f.id, f.tenant_id, f.user_id, f.agent_id, f.category, f.status, f.embedding::halfvec,
        binary_quantize(f.embedding::halfvec)::varbit,
        CASE WHEN f.embedding IS NULL THEN '' ELSE f.embedding_model END,
        f.embedding_pending <> '',
        f.search_vector || array_to_tsvector(ARRAY[facts_search_scope(f.tenant_id, f.user_id)])
    FROM new_facts f JOIN unnest(changed) AS c(id) ON c.id = f.id
    WHERE f.valid_to IS NULL AND f.status IN ('active', 'pending');
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION facts_search_entry_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM facts_factsearchentry e USING deleted_facts d
    WHERE e.fact_id = d.id AND e.tenant_id = d.tenant_id AND e.user_id = d.user_id;
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS facts_search_entry_inserted ON facts_fact;
CREATE TRIGGER facts_search_entry_inserted AFTER INSERT ON facts_fact
    REFERENCING NEW TABLE AS inserted_facts FOR EACH STATEMENT EXECUTE FUNCTION facts_search_entry_inserted();
DROP TRIGGER IF EXISTS facts_search_entry_updated ON facts_fact;
CREATE TRIGGER facts_search_entry_updated AFTER UPDATE ON facts_fact
    REFERENCING OLD TABLE AS old_facts NEW TABLE AS new_facts FOR EACH STATEMENT
    EXECUTE FUNCTION facts_search_entry_updated();
DROP TRIGGER IF EXISTS facts_search_entry_deleted ON facts_fact;
CREATE TRIGGER facts_search_entry_deleted AFTER DELETE ON facts_fact
    REFERENCING OLD TABLE AS deleted_facts FOR EACH STATEMENT EXECUTE FUNCTION facts_search_entry_deleted();


-- Entries are never updated (a changed fact's entry is deleted and inserted again, above), so the counts and the
-- terms below follow inserts and deletes alone; an UPDATE would leave them behind, and is refused.
CREATE OR REPLACE FUNCTION facts_search_entry_update_refused() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'facts_factsearchentry follows facts_fact through its triggers: update the fact instead';
END $$;

DROP TRIGGER IF EXISTS facts_search_count_updated ON facts_factsearchentry;
DROP TRIGGER IF EXISTS facts_search_term_updated ON facts_factsearchentry;
DROP FUNCTION IF EXISTS facts_search_count_updated(), facts_search_term_updated();
DROP TRIGGER IF EXISTS facts_search_entry_update_refused ON facts_factsearchentry;
CREATE TRIGGER facts_search_entry_update_refused BEFORE UPDATE ON facts_factsearchentry
    FOR EACH STATEMENT EXECUTE FUNCTION facts_search_entry_update_refused();


-- Counts: each statement's net change per key, upserted in key order (concurrent writers lock rows alike); a row
-- that reaches 0 is dropped.
CREATE OR REPLACE FUNCTION facts_search_count_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO facts_factsearchcount AS c
        (tenant_id, user_id, status, agent_id, category, vector_model, awaiting_vector, entries)
    SELECT tenant_id, user_id, status, agent_id, category, vector_model, awaiting_vector, count(*)
    FROM inserted_entries
    GROUP BY tenant_id, user_id, status, agent_id, category, vector_model, awaiting_vector
    ORDER BY tenant_id, user_id, status, agent_id, category, vector_model, awaiting_vector
    ON CONFLICT (tenant_id, user_id, status, agent_id, category, vector_model, awaiting_vector)
        DO UPDATE SET entries = c.entries + EXCLUDED.entries;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION facts_search_count_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO facts_factsearchcount AS c
        (tenant_id, user_id, status, agent_id, category, vector_model, awaiting_vector, entries)
    SELECT tenant_id, user_id, status, agent_id, category, vector_model, awaiting_vector, -count(*)
    FROM deleted_entries
    GROUP BY tenant_id, user_id, status, agent_id, category, vector_model, awaiting_vector
    ORDER BY tenant_id, user_id, status, agent_id, category, vector_model, awaiting_vector
    ON CONFLICT (tenant_id, user_id, status, agent_id, category, vector_model, awaiting_vector)
        DO UPDATE SET entries = c.entries + EXCLUDED.entries;
    DELETE FROM facts_factsearchcount c
    USING (SELECT DISTINCT tenant_id, user_id, status, agent_id, category, vector_model, awaiting_vector
           FROM deleted_entries) k
    WHERE c.entries = 0
        AND (c.tenant_id, c.user_id, c.status, c.agent_id, c.category, c.vector_model, c.awaiting_vector)
            = (k.tenant_id, k.user_id, k.status, k.agent_id, k.category, k.vector_model, k.awaiting_vector);
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS facts_search_count_inserted ON facts_factsearchentry;
CREATE TRIGGER facts_search_count_inserted AFTER INSERT ON facts_factsearchentry
    REFERENCING NEW TABLE AS inserted_entries FOR EACH STATEMENT EXECUTE FUNCTION facts_search_count_inserted();
DROP TRIGGER IF EXISTS facts_search_count_deleted ON facts_factsearchentry;
CREATE TRIGGER facts_search_count_deleted AFTER DELETE ON facts_factsearchentry
    REFERENCING OLD TABLE AS deleted_entries FOR EACH STATEMENT EXECUTE FUNCTION facts_search_count_deleted();


-- Terms: per user, lexeme and the same key, the entries holding the lexeme (the scope lexeme left out), upserted
-- in key order like the counts; the rows that reach 0 are dropped, each found through the key's index (a join
-- could scan every user's rows). Each trigger first locks every user whose words the statement changes (in one
-- order, to the end of the transaction): a transaction that changes a user's words in two statements would
-- otherwise hold one word's row while another writer, holding a second, waits for it
-- (tests/facts/test_search_entries.py, the two writers). The key is core.locks' (LockNamespace.SEARCH_TERMS = 5).
CREATE OR REPLACE FUNCTION facts_search_terms_lock(users text[]) RETURNS void LANGUAGE sql AS $$
    SELECT pg_advisory_xact_lock(key) FROM (
        SELECT DISTINCT core_lock_key(5, unnest(users)) AS key ORDER BY 1
    ) keys
$$;

CREATE OR REPLACE FUNCTION facts_search_term_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM facts_search_terms_lock(ARRAY(SELECT tenant_id::text || chr(31) || user_id FROM inserted_entries));
    INSERT INTO facts_factsearchterm AS t
        (tenant_id, user_id, lexeme, status, agent_id, category, vector_model, awaiting_vector, entries)
    SELECT e.tenant_id, e.user_id, lexeme, e.status, e.agent_id, e.category, e.vector_model, e.awaiting_vector,
        count(*)
    FROM inserted_entries e, unnest(tsvector_to_array(e.keywords)) AS lexeme
    WHERE lexeme <> facts_search_scope(e.tenant_id, e.user_id)
    GROUP BY e.tenant_id, e.user_id, lexeme, e.status, e.agent_id, e.category, e.vector_model, e.awaiting_vector
    ORDER BY e.tenant_id, e.user_id, lexeme, e.status, e.agent_id, e.category, e.vector_model, e.awaiting_vector
    ON CONFLICT (tenant_id, user_id, lexeme, status, agent_id, category, vector_model, awaiting_vector)
        DO UPDATE SET entries = t.entries + EXCLUDED.entries;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION facts_search_term_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM facts_search_terms_lock(ARRAY(SELECT tenant_id::text || chr(31) || user_id FROM deleted_entries));
    INSERT INTO facts_factsearchterm AS t
        (tenant_id, user_id, lexeme, status, agent_id, category, vector_model, awaiting_vector, entries)
    SELECT e.tenant_id, e.user_id, lexeme, e.status, e.agent_id, e.category, e.vector_model, e.awaiting_vector,
        -count(*)
    FROM deleted_entries e, unnest(tsvector_to_array(e.keywords)) AS lexeme
    WHERE lexeme <> facts_search_scope(e.tenant_id, e.user_id)
    GROUP BY e.tenant_id, e.user_id, lexeme, e.status, e.agent_id, e.category, e.vector_model, e.awaiting_vector
    ORDER BY e.tenant_id, e.user_id, lexeme, e.status, e.agent_id, e.category, e.vector_model, e.awaiting_vector
    ON CONFLICT (tenant_id, user_id, lexeme, status, agent_id, category, vector_model, awaiting_vector)
        DO UPDATE SET entries = t.entries + EXCLUDED.entries;
    DELETE FROM facts_factsearchterm WHERE id = ANY(ARRAY(
        SELECT t.id
        FROM (
            SELECT DISTINCT e.tenant_id, e.user_id, lexeme, e.status, e.agent_id, e.category, e.vector_model,
                e.awaiting_vector
            FROM deleted_entries e, unnest(tsvector_to_array(e.keywords)) AS lexeme
        ) k
        CROSS JOIN LATERAL (
            SELECT id FROM facts_factsearchterm t
            WHERE t.tenant_id = k.tenant_id AND t.user_id = k.user_id AND t.lexeme = k.lexeme
                AND t.status = k.status AND t.agent_id = k.agent_id AND t.category = k.category
                AND t.vector_model = k.vector_model AND t.awaiting_vector = k.awaiting_vector AND t.entries = 0
        ) t
    ));
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS facts_search_term_inserted ON facts_factsearchentry;
CREATE TRIGGER facts_search_term_inserted AFTER INSERT ON facts_factsearchentry
    REFERENCING NEW TABLE AS inserted_entries FOR EACH STATEMENT EXECUTE FUNCTION facts_search_term_inserted();
DROP TRIGGER IF EXISTS facts_search_term_deleted ON facts_factsearchentry;
CREATE TRIGGER facts_search_term_deleted AFTER DELETE ON facts_factsearchentry
    REFERENCING OLD TABLE AS deleted_entries FOR EACH STATEMENT EXECUTE FUNCTION facts_search_term_deleted();


-- The three tables made afresh from facts_fact (the triggers above fill the counts and the terms): what a database
-- whose triggers were missing needs, and a repair should the tables ever disagree with the facts.
CREATE OR REPLACE FUNCTION facts_search_rebuild() RETURNS void LANGUAGE sql AS $$
    TRUNCATE facts_factsearchentry, facts_factsearchcount, facts_factsearchterm;
    INSERT INTO facts_factsearchentry
        (fact_id, tenant_id, user_id, agent_id, category, status, embedding, signs, vector_model, awaiting_vector,
         keywords)
    SELECT f.id, f.tenant_id, f.user_id, f.agent_id, f.category, f.status, f.embedding::halfvec,
        binary_quantize(f.embedding::halfvec)::varbit,
        CASE WHEN f.embedding IS NULL THEN '' ELSE f.embedding_model END,
        f.embedding_pending <> '',
        f.search_vector || array_to_tsvector(ARRAY[facts_search_scope(f.tenant_id, f.user_id)])
    FROM facts_fact f
    WHERE f.valid_to IS NULL AND f.status IN ('active', 'pending');
$$;
