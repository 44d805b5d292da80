/*
Package duckdb is a destination that writes assets' partitions into
tables of a DuckDB database, the embedded analytical database: a
[tranche.Destination] on github.com/tranche-dev/tranche/destination/sqldest, which
declares the tables ([sqldest.Table]) and checks every batch against them,
with DuckDB's dialect ([Dialect]), through github.com/duckdb/duckdb-go/v2
(cgo).

	d, err := duckdb.Open(ctx, "warehouse.duckdb", sqldest.Table{
		Name: "events", Partition: "day", Columns: []sqldest.Column{
			{Name: "day", Type: column.Time},
			{Name: "n", Type: column.Int},
		}})
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.CreateTables(ctx); err != nil {
		return err
	}

# Writes

Each write replaces the batch's partition in one transaction: the fencing
check against the token table (sqldest.TokenTable), which refuses a batch
whose token is older than the partition's last write with a
[*sqldest.TokenError] matching [tranche.ErrFenced]; the delete of the
partition's rows; and the rows, appended with DuckDB's appender on the
transaction's connection, which commit or roll back with the rest.
DuckDB's transactions are optimistic: of two writers of one partition at
once, the second fails at once rather than waiting, and is tried again.
The fencing check reads the partition's token row, then updates or
inserts it ([sqldest.Dialect.SelectToken]), which costs DuckDB half an
upsert: two first writes of a partition that both find no row both
insert one, the second to commit fails on the duplicate key, and its try
again reads the first's token (the older attempt refused, the newer one
replacing it).

DuckDB holds no ledger of tranche's: its writes commit on their own,
after the backfill's ledger (SQLite, PostgreSQL, or in memory) has
leased the partition and before it records the success. The newest
attempt wins and a stale one is refused, so a table ends with the rows
of the attempt that succeeded; but a worker killed between its write and
its finish has written, and the partition is written again by the next
attempt (an appending table then holds both attempts' rows: deduplicate
by the delivery id, [sqldest.FromDeliveryID]).

# Types

The default SQL types of the column types are BIGINT, DOUBLE, VARCHAR, BOOLEAN,
TIMESTAMPTZ and BLOB. A table created otherwise may declare narrower
types, which each write reads from the table (the types of the
columns of a query of it that returns no row, in the write's
transaction, so that a table altered between writes is checked as it
is now) and checks each value against as it appends it (a Meta
column's value, the batch's, once for the batch), since DuckDB's
appender stores a value as its column's type without a check of its
own (300 into a TINYINT would be 44): an Int column takes the
integer types, signed and unsigned, HUGEINT, DECIMAL(p,s), and DOUBLE and
FLOAT where they hold it exactly; a Float column DOUBLE, FLOAT and
DECIMAL (rounded half away from zero to its scale, as DuckDB's casts
round); a String column VARCHAR, which holds UTF-8 only (NUL bytes are
allowed); a Time column TIMESTAMPTZ, TIMESTAMP (which holds the UTC
time), TIMESTAMP_NS, TIMESTAMP_MS and TIMESTAMP_S, to their unit
(TIMESTAMPTZ and TIMESTAMP keep microseconds; finer digits are dropped, as
DuckDB's casts drop them), within their years; a Bool column BOOLEAN; a
Bytes column BLOB. A value that does not fit its column refuses the
write with a [*column.ValueError] naming the destination, the table,
the asset, the partition, the row, the column and the value, matching
[column.ErrOutOfRange] (or [column.ErrMistyped] for a column whose type
takes no value of the kind), and the transaction is rolled back, the
rows appended before it with the rest: nothing is written for the
partition.

[Dialect] sets [sqldest.Dialect.NoPartitionIndex], which leaves out the index on the partition column
that other databases get: DuckDB's deletes by range are pruned by the
zone maps of its row groups, and an ART index would slow every append.

# Files

DuckDB lets one process at a time open a file for writing. [Open] holds
the file until [Destination.Close]; while another process has it open
(the duckdb shell, another program), Open fails with a
[*sqlledger.Error] matching [sqlledger.ErrLocked] that names the file. Read
what was written in the same process, through [Destination.DB], or after
Close. A program that uses the file otherwise too passes its own
database to [New]. The workers of a backfill in several processes need a
database server: github.com/tranche-dev/tranche/ledger/postgres.

# Building

The driver is cgo: it links DuckDB's static library, which its module
ships for each platform (github.com/duckdb/duckdb-go-bindings), so the
build needs a C toolchain (CGO_ENABLED=1, gcc or clang) and nothing else.
The first build from a clean build cache takes 35 to 65 s on two cores,
the standard library included; later ones take the cached package.
*/
package duckdb
