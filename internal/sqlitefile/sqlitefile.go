// Package sqlitefile opens the SQLite database of a private data directory
// the way this project keeps durable state (the validator's store, the
// local chain): the directory 0700 (one that others may write to is
// refused: they could swap the database or its journal), an exclusive lock
// on a file in it that a second process cannot take, and the database file
// 0600 in WAL mode with synchronous=FULL, foreign keys on, a busy timeout
// and one connection. It is the one place that imports the SQLite driver.
package sqlitefile

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// ErrLocked: another process holds the directory's lock.
var ErrLocked = errors.New("another process holds the data directory")

// DB is an open database and the directory lock it was opened under.
type DB struct {
	*sql.DB
	// Path is the database file.
	Path string
	lock *os.File
}

// Close closes the database, then gives the lock up.
func (d *DB) Close() error {
	err := d.DB.Close()
	if d.lock != nil {
		if lerr := d.lock.Close(); err == nil {
			err = lerr
		}
	}
	return err
}

// Open opens (creating) dir/file under an exclusive lock on dir/lock.
func Open(ctx context.Context, dir, file, lock string) (*DB, error) {
	if dir == "" {
		return nil, errors.New("no data directory")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, file)
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("%s: the path may not hold '?' or '#' (SQLite URI)", path)
	}
	if err := privateDir(dir); err != nil {
		return nil, err
	}
	l, err := lockFile(filepath.Join(dir, lock))
	if err != nil {
		return nil, err
	}
	db, err := openFile(ctx, path)
	if err != nil {
		if l != nil {
			l.Close()
		}
		return nil, err
	}
	return &DB{DB: db, Path: path, lock: l}, nil
}

// privateDir creates dir 0700, or makes an existing one 0700 unless others
// may already write to it.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("data directory %s: not a directory", dir)
	}
	if runtime.GOOS == "windows" {
		return nil
	}
	if st.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("data directory %s: mode %v lets others write to it; chmod 700 it", dir, st.Mode().Perm())
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("data directory mode: %w", err)
	}
	return nil
}

func openFile(ctx context.Context, path string) (*sql.DB, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("database file: %w", err)
	}
	f.Close()
	if err := os.Chmod(path, 0o600); err != nil {
		return nil, fmt.Errorf("database file mode: %w", err)
	}
	dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(1)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// One connection: the process is the only writer (the lock), and
	// transactions take turns on it.
	db.SetMaxOpenConns(1)
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if mode != "wal" {
		db.Close()
		return nil, fmt.Errorf("%s: journal mode is %q, want wal", path, mode)
	}
	return db, nil
}
