-- core.locks.lock_key in SQL, for the locks a trigger takes: the namespace (core.locks.LockNamespace) in the high
-- 16 bits, the first 48 bits of the MD5 of the parts joined by U+001F in the low 48. tests/test_locks.py checks that
-- both give the same key.
CREATE OR REPLACE FUNCTION core_lock_key(namespace integer, parts text) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (namespace::bigint << 48) | ('x' || substr(md5(parts), 1, 12))::bit(48)::bigint
$$;
