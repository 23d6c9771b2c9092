package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// SQLite store layout: <dir>/cacheon.db (0600) and <dir>/lock, in a 0700
// directory.
const (
	dbName   = "cacheon.db"
	lockName = "lock"
)

var sqliteDialect = dialect{name: "sqlite"}

// openSQLite opens the store in directory dir: it creates dir (0700) if
// needed, takes an exclusive flock on dir/lock that a second validator on
// the same directory cannot get, and opens the database in WAL mode with
// synchronous=FULL and foreign keys on; write transactions begin with
// BEGIN IMMEDIATE.
func openSQLite(ctx context.Context, dir string) (Store, error) {
	if strings.ContainsAny(dir, "?#") {
		return nil, fmt.Errorf("open store %q: the directory name may not contain ? or #", dir)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open store: create directory: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open store: directory mode: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open store: lock file: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("open store %s: another validator holds %s: %w", dir, filepath.Join(dir, lockName), ErrLocked)
		}
		return nil, fmt.Errorf("open store %s: lock: %w", dir, err)
	}
	s, err := openSQLiteLocked(ctx, dir)
	if err != nil {
		lock.Close()
		return nil, err
	}
	s.closeFn = lock.Close
	return s, nil
}

func openSQLiteLocked(ctx context.Context, dir string) (*sqlStore, error) {
	path := filepath.Join(dir, dbName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open store: database file: %w", err)
	}
	f.Close()
	if err := os.Chmod(path, 0o600); err != nil {
		return nil, fmt.Errorf("open store: database file mode: %w", err)
	}
	dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(1)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	// One connection, held by the store: the process is the only writer
	// (the lock file), and transactions take turns on it.
	db.SetMaxOpenConns(1)
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if mode != "wal" {
		db.Close()
		return nil, fmt.Errorf("open store %s: journal mode is %q, want wal", path, mode)
	}
	if err := migrate(ctx, db, sqliteDialect); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return &sqlStore{db: db, d: sqliteDialect, conn: conn, cache: map[string]*sql.Stmt{}}, nil
}
