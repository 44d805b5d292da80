package postgres

import (
	"github.com/jackc/pgx/v5"

	"github.com/tranche-dev/tranche/destination/sqldest"
	"github.com/tranche-dev/tranche/ledger/sqlledger"
)

// DestinationDialect is the destinations' dialect, for benchmarks that
// build a destination on a pool of their choice.
func DestinationDialect() *sqldest.Dialect { return destDialect(nil) }

// DialectFor is the ledger's dialect for cfg and schema, for tests that
// open a sqlledger.Ledger over a pool of their own (one that counts its
// statements).
func DialectFor(cfg *pgx.ConnConfig, schema string) *sqlledger.Dialect {
	return dialectFor(cfg, schema)
}

// LockClass is the first key of the advisory lock of migrations, for the
// test that holds it in another process.
const LockClass = lockClass
