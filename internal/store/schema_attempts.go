package store

// attemptsMigration adds the qualification attempts journal: one row per
// attempt that ended with a verdict, keyed by reservation and attempt
// number, append-only (UPDATE and DELETE refused).
var attemptsMigration = migration{
	sqlite: []string{
		`CREATE TABLE attempts (
			reservation TEXT NOT NULL REFERENCES reservations (id), n INTEGER NOT NULL CHECK (n >= 1),
			lease TEXT NOT NULL, device_group TEXT NOT NULL, holder TEXT NOT NULL,
			reproduction INTEGER NOT NULL CHECK (reproduction IN (0, 1)),
			verdict TEXT NOT NULL CHECK (verdict IN ('PASS', 'FAIL', 'NO_DECISION')),
			reason TEXT NOT NULL, detail TEXT NOT NULL, evidence TEXT NOT NULL,
			incumbent TEXT NOT NULL, target TEXT NOT NULL, proposal TEXT NOT NULL,
			speedup_ppm INTEGER NOT NULL CHECK (speedup_ppm >= 0), block INTEGER NOT NULL,
			started_ms INTEGER NOT NULL, ended_ms INTEGER NOT NULL,
			PRIMARY KEY (reservation, n)) STRICT`,
		`CREATE TRIGGER attempts_no_update BEFORE UPDATE ON attempts BEGIN SELECT RAISE(ABORT, 'attempts are append-only'); END`,
		`CREATE TRIGGER attempts_no_delete BEFORE DELETE ON attempts BEGIN SELECT RAISE(ABORT, 'attempts are append-only'); END`,
	},
	postgres: []string{
		`CREATE TABLE attempts (
			reservation TEXT NOT NULL REFERENCES reservations (id), n BIGINT NOT NULL CHECK (n >= 1),
			lease TEXT NOT NULL, device_group TEXT NOT NULL, holder TEXT NOT NULL,
			reproduction BIGINT NOT NULL CHECK (reproduction IN (0, 1)),
			verdict TEXT NOT NULL CHECK (verdict IN ('PASS', 'FAIL', 'NO_DECISION')),
			reason TEXT NOT NULL, detail TEXT NOT NULL, evidence TEXT NOT NULL,
			incumbent TEXT NOT NULL, target TEXT NOT NULL, proposal TEXT NOT NULL,
			speedup_ppm BIGINT NOT NULL CHECK (speedup_ppm >= 0), block BIGINT NOT NULL,
			started_ms BIGINT NOT NULL, ended_ms BIGINT NOT NULL,
			PRIMARY KEY (reservation, n))`,
		`CREATE FUNCTION attempts_append_only() RETURNS trigger LANGUAGE plpgsql AS
			'BEGIN RAISE EXCEPTION ''attempts are append-only''; END'`,
		`CREATE TRIGGER attempts_append_only BEFORE UPDATE OR DELETE ON attempts
			FOR EACH STATEMENT EXECUTE FUNCTION attempts_append_only()`,
	},
}
