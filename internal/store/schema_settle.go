package store

// settleMigration adds settlement's tables: the hash-chained settlement
// journal (append-only), the evaluation stack (one row, compare-and-swap),
// reward claims, settlement decisions (and a decided flag on reservations)
// and the settlement lease.
var settleMigration = migration{
	sqlite: []string{
		`CREATE TABLE settle_journal (
			seq INTEGER PRIMARY KEY, digest TEXT NOT NULL UNIQUE, prev TEXT NOT NULL,
			kind TEXT NOT NULL, reservation TEXT NOT NULL, data BLOB NOT NULL) STRICT`,
		`CREATE TRIGGER settle_journal_no_update BEFORE UPDATE ON settle_journal BEGIN SELECT RAISE(ABORT, 'the settlement journal is append-only'); END`,
		`CREATE TRIGGER settle_journal_no_delete BEFORE DELETE ON settle_journal BEGIN SELECT RAISE(ABORT, 'the settlement journal is append-only'); END`,
		`CREATE TABLE eval_stack (id INTEGER PRIMARY KEY CHECK (id = 1), generation INTEGER NOT NULL, digest TEXT NOT NULL, body BLOB NOT NULL) STRICT`,
		`INSERT INTO eval_stack (id, generation, digest, body) VALUES (1, 0, '', X'')`,
		`CREATE TABLE reward_claims (
			reservation TEXT PRIMARY KEY REFERENCES reservations (id), hotkey TEXT NOT NULL, target TEXT NOT NULL,
			proposal TEXT NOT NULL, speedup_ppm INTEGER NOT NULL, crowned_block INTEGER NOT NULL, generation INTEGER NOT NULL,
			active INTEGER NOT NULL CHECK (active IN (0, 1)), superseded_by TEXT NOT NULL) STRICT`,
		`CREATE INDEX reward_claims_active ON reward_claims (active, reservation)`,
		`CREATE TABLE settle_decisions (
			reservation TEXT PRIMARY KEY REFERENCES reservations (id), outcome TEXT NOT NULL CHECK (outcome IN ('crowned', 'held')),
			reason TEXT NOT NULL, seq INTEGER NOT NULL, at_ms INTEGER NOT NULL) STRICT`,
		`CREATE TABLE settle_lease (id INTEGER PRIMARY KEY CHECK (id = 1), lease TEXT NOT NULL, holder TEXT NOT NULL,
			acquired_ms INTEGER NOT NULL, expires_ms INTEGER NOT NULL) STRICT`,
		// decided is 1 once the reservation has a settlement decision:
		// Undecided reads only the open ones, however long the history.
		`ALTER TABLE reservations ADD COLUMN decided INTEGER NOT NULL DEFAULT 0 CHECK (decided IN (0, 1))`,
		`CREATE INDEX reservations_undecided ON reservations (decided, state, block, idx)`,
	},
	postgres: []string{
		`CREATE TABLE settle_journal (
			seq BIGINT PRIMARY KEY, digest TEXT NOT NULL UNIQUE, prev TEXT NOT NULL,
			kind TEXT NOT NULL, reservation TEXT NOT NULL, data BYTEA NOT NULL)`,
		`CREATE FUNCTION settle_journal_append_only() RETURNS trigger LANGUAGE plpgsql AS
			'BEGIN RAISE EXCEPTION ''the settlement journal is append-only''; END'`,
		`CREATE TRIGGER settle_journal_append_only BEFORE UPDATE OR DELETE ON settle_journal
			FOR EACH STATEMENT EXECUTE FUNCTION settle_journal_append_only()`,
		`CREATE TABLE eval_stack (id INTEGER PRIMARY KEY CHECK (id = 1), generation BIGINT NOT NULL, digest TEXT NOT NULL, body BYTEA NOT NULL)`,
		`INSERT INTO eval_stack (id, generation, digest, body) VALUES (1, 0, '', '')`,
		`CREATE TABLE reward_claims (
			reservation TEXT PRIMARY KEY REFERENCES reservations (id), hotkey TEXT NOT NULL, target TEXT NOT NULL,
			proposal TEXT NOT NULL, speedup_ppm BIGINT NOT NULL, crowned_block BIGINT NOT NULL, generation BIGINT NOT NULL,
			active BIGINT NOT NULL CHECK (active IN (0, 1)), superseded_by TEXT NOT NULL)`,
		`CREATE INDEX reward_claims_active ON reward_claims (active, reservation)`,
		`CREATE TABLE settle_decisions (
			reservation TEXT PRIMARY KEY REFERENCES reservations (id), outcome TEXT NOT NULL CHECK (outcome IN ('crowned', 'held')),
			reason TEXT NOT NULL, seq BIGINT NOT NULL, at_ms BIGINT NOT NULL)`,
		`CREATE TABLE settle_lease (id INTEGER PRIMARY KEY CHECK (id = 1), lease TEXT NOT NULL, holder TEXT NOT NULL,
			acquired_ms BIGINT NOT NULL, expires_ms BIGINT NOT NULL)`,
		`ALTER TABLE reservations ADD COLUMN decided BIGINT NOT NULL DEFAULT 0 CHECK (decided IN (0, 1))`,
		`CREATE INDEX reservations_undecided ON reservations (decided, state, block, idx)`,
	},
}
