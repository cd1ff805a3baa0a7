-- The fence of krabka-coordination for PostgreSQL (docs/fenced-stores.md).
-- Idempotent: run it as a migration as often as needed.
--
-- One row per role: the newest fencing token (producer_id, epoch) that a
-- committed transaction carried through the fence.
CREATE TABLE IF NOT EXISTS krabka_fence (
    role        text     PRIMARY KEY,
    producer_id bigint   NOT NULL,
    epoch       smallint NOT NULL
);

-- krabka_fence(role, producer_id, epoch): call it inside the transaction
-- whose writes the token guards, before committing it. It returns when the
-- token may write and leaves the role's row locked (and advanced) until the
-- transaction ends; otherwise it raises, which aborts the transaction:
--   KF001  fenced: the store accepted a newer token of the same producer id.
--   KF002  the stored token has another producer id: the offered one must be
--          proven current (docs/fenced-stores.md, "Producer id rotation");
--          this function cannot ask Kafka, so it refuses.
--   22023  the token is not a minted one (negative id or epoch).
-- Under REPEATABLE READ or SERIALIZABLE, a row advanced by a transaction
-- that committed after this one's snapshot raises 40001 instead: retry the
-- whole transaction.
CREATE OR REPLACE FUNCTION krabka_fence(p_role text, p_producer_id bigint, p_epoch smallint)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    stored_id    bigint;
    stored_epoch smallint;
BEGIN
    IF p_producer_id < 0 OR p_epoch < 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('krabka_fence: %s/%s is not a minted fencing token', p_producer_id, p_epoch);
    END IF;
    INSERT INTO krabka_fence AS f (role, producer_id, epoch)
        VALUES (p_role, p_producer_id, p_epoch)
        ON CONFLICT (role) DO UPDATE SET epoch = EXCLUDED.epoch
            WHERE f.producer_id = EXCLUDED.producer_id AND f.epoch <= EXCLUDED.epoch
        RETURNING f.producer_id INTO stored_id;
    IF FOUND THEN
        RETURN;
    END IF;
    -- The conflicting row is locked by the statement above even though it
    -- was not updated: it cannot change before this transaction ends.
    SELECT f.producer_id, f.epoch INTO stored_id, stored_epoch
        FROM krabka_fence f WHERE f.role = p_role;
    IF stored_id = p_producer_id THEN
        RAISE EXCEPTION USING ERRCODE = 'KF001',
            MESSAGE = format('fenced: role %L: the store accepted token %s/%s, this transaction offers %s/%s',
                             p_role, stored_id, stored_epoch, p_producer_id, p_epoch);
    END IF;
    RAISE EXCEPTION USING ERRCODE = 'KF002',
        MESSAGE = format('fenced: role %L: the store accepted token %s/%s of another producer id than the offered %s/%s; '
                         'a rotated producer id must be proven current before it replaces the stored one '
                         '(the plain statements in stores/sql/postgres.sql)',
                         p_role, stored_id, stored_epoch, p_producer_id, p_epoch);
END
$$;

-- The plain statements, for callers that prove a rotation themselves (the
-- Rust helper runs these; $1 role, $2 producer_id, $3 epoch):
--
-- 1. Advance: returns a row when the token may write (no row yet, or the
--    same producer id with an epoch at least the stored one). Locks the
--    role's row either way.
--      INSERT INTO krabka_fence AS f (role, producer_id, epoch) VALUES ($1, $2, $3)
--      ON CONFLICT (role) DO UPDATE SET epoch = EXCLUDED.epoch
--        WHERE f.producer_id = EXCLUDED.producer_id AND f.epoch <= EXCLUDED.epoch
--      RETURNING f.producer_id;
-- 2. When 1 returned no row, read the stored token (locked by 1):
--      SELECT producer_id, epoch FROM krabka_fence WHERE role = $1;
--    Same producer id: the offered token is older: fenced, roll back.
-- 3. Another producer id: ask Kafka now (describe_leadership, `krabka
--    describe`) for the role's current token. Only if it is exactly the
--    offered one:
--      UPDATE krabka_fence SET producer_id = $2, epoch = $3 WHERE role = $1;
--    otherwise fenced, roll back.
