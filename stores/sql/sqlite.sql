-- The fence of krabka-coordination for SQLite (docs/fenced-stores.md).
-- Idempotent: run it as a migration as often as needed.
--
-- One row per role: the newest fencing token (producer_id, epoch) that a
-- committed transaction carried through the fence.
CREATE TABLE IF NOT EXISTS krabka_fence (
    role        TEXT    NOT NULL PRIMARY KEY,
    producer_id INTEGER NOT NULL,
    epoch       INTEGER NOT NULL
) WITHOUT ROWID;

-- The statements the Rust helper runs ($1 role, $2 producer_id, $3 epoch),
-- for other languages. The first is a write, so it takes the database's
-- write lock, which SQLite holds until the transaction ends: no other
-- writer can pass the fence in between.
--
-- 1. Advance: returns a row when the token may write (no row yet, or the
--    same producer id with an epoch at least the stored one).
--      INSERT INTO krabka_fence (role, producer_id, epoch) VALUES (?1, ?2, ?3)
--      ON CONFLICT (role) DO UPDATE SET epoch = excluded.epoch
--        WHERE krabka_fence.producer_id = excluded.producer_id
--          AND krabka_fence.epoch <= excluded.epoch
--      RETURNING producer_id;
-- 2. When 1 returned no row, read the stored token:
--      SELECT producer_id, epoch FROM krabka_fence WHERE role = ?1;
--    Same producer id: the offered token is older: fenced, roll back.
-- 3. Another producer id: ask Kafka now for the role's current token. Only
--    if it is exactly the offered one:
--      UPDATE krabka_fence SET producer_id = ?2, epoch = ?3 WHERE role = ?1;
--    otherwise fenced, roll back.
