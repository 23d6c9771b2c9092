package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"

	"cacheon/internal/sqlitefile"
)

// SQLite store layout: <dir>/cacheon.db (0600) and <dir>/lock, in a 0700
// directory.
const (
	dbName   = "cacheon.db"
	lockName = "lock"
)

var sqliteDialect = dialect{name: "sqlite"}

// openSQLite opens the store in directory dir through sqlitefile: dir 0700
// (created if needed; one others may write to is refused), an exclusive
// flock on dir/lock that a second validator on the same directory cannot
// get, the database in WAL mode with synchronous=FULL and foreign keys on;
// write transactions begin with BEGIN IMMEDIATE.
func openSQLite(ctx context.Context, dir string) (Store, error) {
	f, err := sqlitefile.Open(ctx, dir, dbName, lockName)
	if errors.Is(err, sqlitefile.ErrLocked) {
		return nil, fmt.Errorf("open store %s: another validator holds %s: %w", dir, filepath.Join(dir, lockName), ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	db, path := f.DB, f.Path
	if err := migrate(ctx, db, sqliteDialect); err != nil {
		f.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	// Close closes db, then f gives the lock up (closing db again is a no-op).
	return &sqlStore{db: db, d: sqliteDialect, conn: conn, cache: map[string]*sql.Stmt{}, closeFn: f.Close}, nil
}
