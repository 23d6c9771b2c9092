package store

import (
	"context"
	"database/sql"
	"fmt"
)

// A migration is the ordered statements that take the schema from version
// i to i+1 (migrations[i]). Migrations are append-only: a released one is
// never edited; a change is a new one.
type migration struct {
	sqlite   []string
	postgres []string
}

var migrations = []migration{{
	sqlite: []string{
		`CREATE TABLE intake_cursor (id INTEGER PRIMARY KEY CHECK (id = 1), block INTEGER NOT NULL, idx INTEGER NOT NULL) STRICT`,
		`INSERT INTO intake_cursor (id, block, idx) VALUES (1, 0, 0)`,
		`CREATE TABLE reservations (
			id TEXT PRIMARY KEY, block INTEGER NOT NULL, idx INTEGER NOT NULL,
			hotkey TEXT NOT NULL, content_hash TEXT NOT NULL, url TEXT NOT NULL,
			commit_block INTEGER NOT NULL, extrinsic TEXT NOT NULL, arena TEXT NOT NULL, epoch INTEGER NOT NULL,
			state TEXT NOT NULL, reason TEXT NOT NULL, fingerprint TEXT NOT NULL,
			fetch_attempts INTEGER NOT NULL, attempts INTEGER NOT NULL, passes INTEGER NOT NULL, no_decisions INTEGER NOT NULL,
			bundle_failed INTEGER NOT NULL CHECK (bundle_failed IN (0, 1)),
			updated_block INTEGER NOT NULL, updated_ms INTEGER NOT NULL,
			UNIQUE (block, idx)) STRICT`,
		`CREATE INDEX reservations_state ON reservations (state, block, idx)`,
		`CREATE INDEX reservations_hotkey ON reservations (hotkey, epoch)`,
		`CREATE INDEX reservations_hash ON reservations (content_hash)`,
		`CREATE INDEX reservations_fingerprint ON reservations (fingerprint) WHERE fingerprint <> ''`,
		`CREATE TABLE events (
			seq INTEGER PRIMARY KEY AUTOINCREMENT,
			reservation TEXT NOT NULL REFERENCES reservations (id),
			from_state TEXT NOT NULL, to_state TEXT NOT NULL, reason TEXT NOT NULL,
			block INTEGER NOT NULL, at_ms INTEGER NOT NULL) STRICT`,
		`CREATE INDEX events_reservation ON events (reservation, seq)`,
		`CREATE TRIGGER events_no_update BEFORE UPDATE ON events BEGIN SELECT RAISE(ABORT, 'events are append-only'); END`,
		`CREATE TRIGGER events_no_delete BEFORE DELETE ON events BEGIN SELECT RAISE(ABORT, 'events are append-only'); END`,
		`CREATE TABLE leases (
			id TEXT PRIMARY KEY, device_group TEXT NOT NULL UNIQUE, holder TEXT NOT NULL,
			reservation TEXT NOT NULL UNIQUE REFERENCES reservations (id), from_state TEXT NOT NULL,
			acquired_ms INTEGER NOT NULL, expires_ms INTEGER NOT NULL) STRICT`,
	},
	postgres: []string{
		`CREATE TABLE intake_cursor (id INTEGER PRIMARY KEY CHECK (id = 1), block BIGINT NOT NULL, idx BIGINT NOT NULL)`,
		`INSERT INTO intake_cursor (id, block, idx) VALUES (1, 0, 0)`,
		`CREATE TABLE reservations (
			id TEXT PRIMARY KEY, block BIGINT NOT NULL, idx BIGINT NOT NULL,
			hotkey TEXT NOT NULL, content_hash TEXT NOT NULL, url TEXT NOT NULL,
			commit_block BIGINT NOT NULL, extrinsic TEXT NOT NULL, arena TEXT NOT NULL, epoch BIGINT NOT NULL,
			state TEXT NOT NULL, reason TEXT NOT NULL, fingerprint TEXT NOT NULL,
			fetch_attempts BIGINT NOT NULL, attempts BIGINT NOT NULL, passes BIGINT NOT NULL, no_decisions BIGINT NOT NULL,
			bundle_failed BIGINT NOT NULL CHECK (bundle_failed IN (0, 1)),
			updated_block BIGINT NOT NULL, updated_ms BIGINT NOT NULL,
			UNIQUE (block, idx))`,
		`CREATE INDEX reservations_state ON reservations (state, block, idx)`,
		`CREATE INDEX reservations_hotkey ON reservations (hotkey, epoch)`,
		`CREATE INDEX reservations_hash ON reservations (content_hash)`,
		`CREATE INDEX reservations_fingerprint ON reservations (fingerprint) WHERE fingerprint <> ''`,
		`CREATE TABLE events (
			seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
			reservation TEXT NOT NULL REFERENCES reservations (id),
			from_state TEXT NOT NULL, to_state TEXT NOT NULL, reason TEXT NOT NULL,
			block BIGINT NOT NULL, at_ms BIGINT NOT NULL)`,
		`CREATE INDEX events_reservation ON events (reservation, seq)`,
		`CREATE FUNCTION events_append_only() RETURNS trigger LANGUAGE plpgsql AS
			'BEGIN RAISE EXCEPTION ''events are append-only''; END'`,
		`CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events
			FOR EACH STATEMENT EXECUTE FUNCTION events_append_only()`,
		`CREATE TABLE leases (
			id TEXT PRIMARY KEY, device_group TEXT NOT NULL UNIQUE, holder TEXT NOT NULL,
			reservation TEXT NOT NULL UNIQUE REFERENCES reservations (id), from_state TEXT NOT NULL,
			acquired_ms BIGINT NOT NULL, expires_ms BIGINT NOT NULL)`,
	},
},
	weightsMigration,
	settleMigration,
	attemptsMigration,
}

// SchemaVersion is the schema version this binary writes.
func SchemaVersion() int { return len(migrations) }

// migrate brings db to the binary's schema version in one transaction, and
// refuses a database that a newer binary migrated.
func migrate(ctx context.Context, db *sql.DB, d dialect) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: begin: %w", err)
	}
	defer tx.Rollback()
	create := `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL PRIMARY KEY) STRICT`
	if d.name == "postgres" {
		// Two validators starting at once migrate one after the other.
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(7283461002)`); err != nil {
			return fmt.Errorf("migrate: lock: %w", err)
		}
		create = `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL PRIMARY KEY)`
	}
	if _, err := tx.ExecContext(ctx, create); err != nil {
		return fmt.Errorf("migrate: schema_version: %w", err)
	}
	var have int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&have); err != nil {
		return fmt.Errorf("migrate: read version: %w", err)
	}
	if have > len(migrations) {
		return fmt.Errorf("migrate: database is at schema version %d, this binary knows up to %d (upgrade the validator): %w",
			have, len(migrations), ErrTooNew)
	}
	for v := have; v < len(migrations); v++ {
		stmts := migrations[v].sqlite
		if d.name == "postgres" {
			stmts = migrations[v].postgres
		}
		for i, s := range stmts {
			if _, err := tx.ExecContext(ctx, s); err != nil {
				return fmt.Errorf("migrate to version %d, statement %d: %w", v+1, i+1, err)
			}
		}
		q := `INSERT INTO schema_version (version) VALUES (?)`
		if d.dollar {
			q = `INSERT INTO schema_version (version) VALUES ($1)`
		}
		if _, err := tx.ExecContext(ctx, q, v+1); err != nil {
			return fmt.Errorf("migrate to version %d: record version: %w", v+1, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: commit: %w", err)
	}
	return nil
}
