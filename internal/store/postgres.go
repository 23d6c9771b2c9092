package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

var postgresDialect = dialect{
	name:       "postgres",
	dollar:     true,
	lockRows:   " FOR UPDATE",
	skipLocked: " FOR UPDATE SKIP LOCKED",
}

// openPostgres opens the store in the PostgreSQL database named by dsn and
// migrates it. Several validators' workers may share it: admissions
// serialize on the cursor row, leases take the queue with SKIP LOCKED.
func openPostgres(ctx context.Context, dsn string) (Store, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open store: postgres dsn: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store: postgres %s: %w", cfg.Database, err)
	}
	if err := migrate(ctx, db, postgresDialect); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store: postgres %s: %w", cfg.Database, err)
	}
	return &sqlStore{db: db, d: postgresDialect}, nil
}
