package localchain

// The chain's SQLite file: schema, opening, loading the state, writing a
// block in one transaction.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"cacheon/internal/canon"
	"cacheon/internal/sqlitefile"
)

// DBFile is the chain database's name inside the data directory.
const DBFile = "chain.db"

const schemaVersion = 1

const schema = `
CREATE TABLE IF NOT EXISTS meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS blocks (
	number          INTEGER PRIMARY KEY,
	hash            TEXT NOT NULL UNIQUE,
	parent          TEXT NOT NULL,
	time_ms         INTEGER NOT NULL,
	extrinsics_root TEXT NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS extrinsics (
	block  INTEGER NOT NULL REFERENCES blocks(number),
	idx    INTEGER NOT NULL,
	id     TEXT NOT NULL UNIQUE,
	kind   TEXT NOT NULL,
	hotkey TEXT NOT NULL,
	body   TEXT NOT NULL,
	PRIMARY KEY (block, idx)
) STRICT;
CREATE INDEX IF NOT EXISTS extrinsics_hotkey ON extrinsics(hotkey);
CREATE TABLE IF NOT EXISTS neurons (
	uid    INTEGER PRIMARY KEY,
	hotkey TEXT NOT NULL UNIQUE,
	block  INTEGER NOT NULL
) STRICT;
CREATE TABLE IF NOT EXISTS commitments (
	digest         TEXT PRIMARY KEY,
	hotkey         TEXT NOT NULL,
	block          INTEGER NOT NULL,
	idx            INTEGER NOT NULL,
	revealed_block INTEGER
) STRICT;
CREATE TABLE IF NOT EXISTS reveals (
	block        INTEGER NOT NULL,
	idx          INTEGER NOT NULL,
	hotkey       TEXT NOT NULL,
	content_hash TEXT NOT NULL,
	url          TEXT NOT NULL,
	commitment   TEXT NOT NULL UNIQUE,
	commit_block INTEGER NOT NULL,
	extrinsic    TEXT NOT NULL,
	PRIMARY KEY (block, idx)
) STRICT;
CREATE TABLE IF NOT EXISTS weights (
	block  INTEGER NOT NULL,
	idx    INTEGER NOT NULL,
	hotkey TEXT NOT NULL,
	body   TEXT NOT NULL,
	PRIMARY KEY (block, idx)
) STRICT;
CREATE INDEX IF NOT EXISTS weights_hotkey ON weights(hotkey, block);
`

// openDB opens (creating) dir/chain.db under the directory's LOCK
// (sqlitefile: a private directory, the file 0600, WAL, synchronous=FULL,
// one connection) and creates the schema.
func openDB(ctx context.Context, dir string) (*sqlitefile.DB, error) {
	db, err := sqlitefile.Open(ctx, dir, DBFile, "LOCK")
	if errors.Is(err, sqlitefile.ErrLocked) {
		return nil, fmt.Errorf("open chain: %w: another node is running on %s", ErrLocked, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("open chain: %w", err)
	}
	if _, err := db.ExecContext(ctx, schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("open chain: schema: %w", err)
	}
	return db, nil
}

// meta reads a meta value ("" when absent).
func meta(ctx context.Context, q querier, key string) (string, error) {
	var v string
	err := q.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return v, err
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// initGenesis writes the meta rows and block 0 of a new chain.
func initGenesis(ctx context.Context, db *sql.DB, finality uint64, salt string, timeMS int64) error {
	parent, err := canon.Digest(GenesisDomain, 1, map[string]string{"salt": salt})
	if err != nil {
		return err
	}
	h := Header{Number: 0, Parent: parent, TimeMS: timeMS}
	if h.ExtrinsicsRoot, err = extrinsicsRoot(nil); err != nil {
		return err
	}
	hash, err := h.Hash()
	if err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for k, v := range map[string]string{
		"schema_version": strconv.Itoa(schemaVersion),
		"genesis":        hash,
		"finality":       strconv.FormatUint(finality, 10),
	} {
		if _, err := tx.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES (?, ?)`, k, v); err != nil {
			return err
		}
	}
	if err := insertHeader(ctx, tx, h, hash); err != nil {
		return err
	}
	return tx.Commit()
}

func insertHeader(ctx context.Context, tx *sql.Tx, h Header, hash string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO blocks(number, hash, parent, time_ms, extrinsics_root) VALUES (?, ?, ?, ?, ?)`,
		int64(h.Number), hash, h.Parent, h.TimeMS, h.ExtrinsicsRoot)
	return err
}

// readHeader reads block n's header and stored hash.
func readHeader(ctx context.Context, q querier, n uint64) (Header, string, error) {
	h := Header{Number: n}
	var hash string
	err := q.QueryRowContext(ctx, `SELECT hash, parent, time_ms, extrinsics_root FROM blocks WHERE number = ?`, int64(n)).
		Scan(&hash, &h.Parent, &h.TimeMS, &h.ExtrinsicsRoot)
	return h, hash, err
}

// load rebuilds the in-memory state from the database and checks the
// head's hash link.
func (c *Chain) load(ctx context.Context) error {
	var n sql.NullInt64
	if err := c.db.QueryRowContext(ctx, `SELECT MAX(number) FROM blocks`).Scan(&n); err != nil {
		return fmt.Errorf("head: %w", err)
	}
	if !n.Valid {
		return errors.New("head: no blocks (a damaged database?)")
	}
	h, hash, err := readHeader(ctx, c.db, uint64(n.Int64))
	if err != nil {
		return fmt.Errorf("head: %w", err)
	}
	if got, err := h.Hash(); err != nil || got != hash {
		return fmt.Errorf("head: block %d's stored hash %s does not match its header (%s)", h.Number, hash, got)
	}
	if h.Number > 0 {
		_, parent, err := readHeader(ctx, c.db, h.Number-1)
		if err != nil {
			return fmt.Errorf("head: parent: %w", err)
		}
		if parent != h.Parent {
			return fmt.Errorf("head: block %d names parent %s, block %d is %s", h.Number, h.Parent, h.Number-1, parent)
		}
	}
	c.head, c.headHash = h, hash

	rows, err := c.db.QueryContext(ctx, `SELECT hotkey, COUNT(*) FROM extrinsics GROUP BY hotkey`)
	if err != nil {
		return fmt.Errorf("nonces: %w", err)
	}
	for rows.Next() {
		var k string
		var cnt uint64
		if err := rows.Scan(&k, &cnt); err != nil {
			rows.Close()
			return fmt.Errorf("nonces: %w", err)
		}
		c.nonces[k] = cnt
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("nonces: %w", err)
	}

	rows, err = c.db.QueryContext(ctx, `SELECT uid, hotkey FROM neurons`)
	if err != nil {
		return fmt.Errorf("neurons: %w", err)
	}
	for rows.Next() {
		var uid uint16
		var k string
		if err := rows.Scan(&uid, &k); err != nil {
			rows.Close()
			return fmt.Errorf("neurons: %w", err)
		}
		c.uids[k] = uid
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("neurons: %w", err)
	}

	rows, err = c.db.QueryContext(ctx, `SELECT digest, hotkey, block, revealed_block IS NOT NULL FROM commitments`)
	if err != nil {
		return fmt.Errorf("commitments: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var d string
		cs := &commitState{}
		if err := rows.Scan(&d, &cs.hotkey, &cs.block, &cs.revealed); err != nil {
			return fmt.Errorf("commitments: %w", err)
		}
		c.commits[d] = cs
	}
	return rows.Err()
}

// writeBlock writes block h (hash) and the effects of its extrinsics in
// one transaction.
func (c *Chain) writeBlock(ctx context.Context, h Header, hash string, xs []pendingXt) error {
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := insertHeader(ctx, tx, h, hash); err != nil {
		return fmt.Errorf("block: %w", err)
	}
	blk := int64(h.Number)
	for i, p := range xs {
		call := p.x.Call
		if _, err := tx.ExecContext(ctx, `INSERT INTO extrinsics(block, idx, id, kind, hotkey, body) VALUES (?, ?, ?, ?, ?, ?)`,
			blk, i, p.id, call.Kind, call.Hotkey, string(p.body)); err != nil {
			return fmt.Errorf("extrinsic %d: %w", i, err)
		}
		switch call.Kind {
		case KindRegister:
			_, err = tx.ExecContext(ctx, `INSERT INTO neurons(uid, hotkey, block) VALUES (?, ?, ?)`, int64(p.uid), call.Hotkey, blk)
		case KindCommit:
			_, err = tx.ExecContext(ctx, `INSERT INTO commitments(digest, hotkey, block, idx) VALUES (?, ?, ?, ?)`, call.Commitment, call.Hotkey, blk, i)
		case KindReveal:
			if _, err = tx.ExecContext(ctx, `UPDATE commitments SET revealed_block = ? WHERE digest = ?`, blk, call.Commitment); err != nil {
				break
			}
			_, err = tx.ExecContext(ctx, `INSERT INTO reveals(block, idx, hotkey, content_hash, url, commitment, commit_block, extrinsic) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
				blk, i, call.Hotkey, call.H, call.U, call.Commitment, int64(p.commitBlock), p.id)
		case KindSetWeights:
			var body []byte
			if body, err = canon.Marshal(call.Weights); err == nil {
				_, err = tx.ExecContext(ctx, `INSERT INTO weights(block, idx, hotkey, body) VALUES (?, ?, ?, ?)`, blk, i, call.Hotkey, string(body))
			}
		}
		if err != nil {
			return fmt.Errorf("extrinsic %d (%s): %w", i, call.Kind, err)
		}
	}
	return tx.Commit()
}
