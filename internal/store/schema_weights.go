package store

// weightsMigration adds the weight publication journal: one row per
// publication, and its append-only history. open_slot is 1 while the
// publication is open and NULL once it ended, so the unique index admits
// at most one open publication (NULLs are distinct on both backends).
var weightsMigration = migration{
	sqlite: []string{
		`CREATE TABLE weight_publications (
			id INTEGER PRIMARY KEY AUTOINCREMENT, hotkey TEXT NOT NULL,
			block INTEGER NOT NULL, deadline INTEGER NOT NULL, vector TEXT NOT NULL,
			state TEXT NOT NULL CHECK (state IN ('intent', 'pending', 'confirmed', 'held')),
			reason TEXT NOT NULL, extrinsic TEXT NOT NULL, submissions INTEGER NOT NULL,
			confirmed_block INTEGER NOT NULL, created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL,
			open_slot INTEGER UNIQUE CHECK (open_slot = 1)) STRICT`,
		`CREATE TABLE weight_events (
			seq INTEGER PRIMARY KEY AUTOINCREMENT,
			publication INTEGER NOT NULL REFERENCES weight_publications (id),
			from_state TEXT NOT NULL, to_state TEXT NOT NULL, reason TEXT NOT NULL,
			block INTEGER NOT NULL, at_ms INTEGER NOT NULL) STRICT`,
		`CREATE INDEX weight_events_publication ON weight_events (publication, seq)`,
		`CREATE TRIGGER weight_events_no_update BEFORE UPDATE ON weight_events BEGIN SELECT RAISE(ABORT, 'weight events are append-only'); END`,
		`CREATE TRIGGER weight_events_no_delete BEFORE DELETE ON weight_events BEGIN SELECT RAISE(ABORT, 'weight events are append-only'); END`,
	},
	postgres: []string{
		`CREATE TABLE weight_publications (
			id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, hotkey TEXT NOT NULL,
			block BIGINT NOT NULL, deadline BIGINT NOT NULL, vector TEXT NOT NULL,
			state TEXT NOT NULL CHECK (state IN ('intent', 'pending', 'confirmed', 'held')),
			reason TEXT NOT NULL, extrinsic TEXT NOT NULL, submissions BIGINT NOT NULL,
			confirmed_block BIGINT NOT NULL, created_ms BIGINT NOT NULL, updated_ms BIGINT NOT NULL,
			open_slot BIGINT UNIQUE CHECK (open_slot = 1))`,
		`CREATE TABLE weight_events (
			seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
			publication BIGINT NOT NULL REFERENCES weight_publications (id),
			from_state TEXT NOT NULL, to_state TEXT NOT NULL, reason TEXT NOT NULL,
			block BIGINT NOT NULL, at_ms BIGINT NOT NULL)`,
		`CREATE INDEX weight_events_publication ON weight_events (publication, seq)`,
		`CREATE FUNCTION weight_events_append_only() RETURNS trigger LANGUAGE plpgsql AS
			'BEGIN RAISE EXCEPTION ''weight events are append-only''; END'`,
		`CREATE TRIGGER weight_events_append_only BEFORE UPDATE OR DELETE ON weight_events
			FOR EACH STATEMENT EXECUTE FUNCTION weight_events_append_only()`,
	},
}
