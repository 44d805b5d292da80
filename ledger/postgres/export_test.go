package postgres

import "github.com/tranche-dev/tranche/sqldest"

// DestinationDialect is the destinations' dialect, for benchmarks that
// build a destination on a pool of their choice.
func DestinationDialect() *sqldest.Dialect { return destDialect(nil) }
