/*
Package sqldest writes assets' partitions into tables of a SQL database
that the user owns: a [tranche.Destination] over database/sql, written
once for SQLite and PostgreSQL, whose constructors live with their
drivers, in github.com/tranche-dev/tranche/ledger/sqlite
(sqlite.NewDestination, sqlite.OpenDestination) and
github.com/tranche-dev/tranche/ledger/postgres (postgres.NewDestination,
postgres.OpenDestination, which inserts with COPY); and DuckDB's, in a
module of its own, github.com/tranche-dev/tranche/destination/duckdb
(duckdb.Open, duckdb.New, which appends with DuckDB's appender,
checking each value against the table's declared types as it appends
it, refusing those that do not fit with [column.ErrOutOfRange]).

# Tables

A [Table] maps the keys of an asset's rows to the columns of a table:
each [Column] has a name, the row key it reads (its name by default), a
[column.Type] of Go values it takes (package destination/column, which
the Parquet destination shares), an SQL type for the table's creation,
and whether it allows NULL. PostgreSQL takes a String only in valid
UTF-8 without NUL bytes, as its text types require, and stores a Time
in a TIMESTAMPTZ column; SQLite, which has no time type, stores a Time
as UTC text of a fixed width ([SQLiteTimeLayout]), which sorts as the
instants do and which SQLite's date functions read. A Bytes value is
copied when the write is handed to a ledger's transaction, which runs
after the batch is back with the runner. Every value of every batch is checked: a row key
that is no column, a value of the wrong kind, and a missing or nil value
where NULL is not allowed refuse the write with a [*column.ValueError] that
names the destination, the table, the asset, the partition, the row, the
column and the value, and says what would be accepted, and nothing of
the write is written. A write committing on its own checks each row as
it inserts it ([Rows]), in one pass over the batch, and a refused value
rolls its transaction back; a write handed to a ledger's transaction is
checked whole when [Destination.Write] takes it. A dialect that checks
values against the table's declared types too (DuckDB) replaces the
spec's check of a column with a [Converter] of its own, chosen once a
write ([Rows.Convert]), so that each value goes through one switch. A
column may take a value of the batch instead of the row: its fencing
token, run id or delivery id ([Meta]), which such a converter checks
once for the batch.

Each write replaces the batch's partition: it deletes the table's rows
whose partition column lies in the partition's bounds, [Start, End) (or,
for a String partition column, equals its key), and inserts the batch's
rows. A table with Append set keeps every write's rows instead, an audit
log of writes. [Destination.CreateTables] creates missing tables with an
index on the partition column; [Table.DDL] returns the statements, for
those who create their tables themselves:

	CREATE TABLE IF NOT EXISTS "events" (
		"day" TIMESTAMPTZ NOT NULL,
		"n" BIGINT NOT NULL,
		"note" TEXT
	)
	CREATE INDEX IF NOT EXISTS "events_day" ON "events" ("day")

# Fencing tokens

Every write of a batch with a fencing token ([tranche.Batch.Token], the
ledger's token of the claim that wrote it) is judged by the fencing rule
every destination shares (destination.Fence.Admit) against the fence the
[TokenTable], tranche_tokens, holds for the partition in the
destination's database, read and locked in the same transaction as the
rows, and is refused with a [*TokenError], matching [tranche.ErrFenced],
when it is stale: the write of an attempt that was taken over, arriving
after the newer attempt's, never overwrites it. A batch without a token
(token 0, from a run outside a ledger) is not fenced and leaves the
stored token alone. Writers of one partition take turns on its row of
the token table, so that concurrent writes never interleave their
deletes and inserts (under DuckDB's optimistic transactions the second
writer fails instead, and is tried again: [Dialect.SelectToken]).
Package destination says how the tokens of two DAG identities compare.

# Guarantees

A destination made with a ledger (sqlite.NewDestination,
postgres.NewDestination) writes into the ledger's database and shares its
transactions: a batch with a token is checked and converted at once, then
handed to the ledger ([sqlledger.Ledger.Defer]), which writes it inside
the transaction in which Finish records the partition's success, after
its fence. The rows and the record of success commit together or not at
all, so a partition's data and its state in the ledger never disagree:

  - a worker killed, or paused past its lease, between its write and its
    finish leaves neither the rows nor the success, and the partition is
    run again by whoever takes it over;
  - a commit lost with the connection or the server leaves neither, and
    a Finish called again commits both once;
  - a commit whose acknowledgment was lost left both, and the next claimer
    finds the partition succeeded;
  - a stale attempt's finish is fenced, and its rows never land.

That is exactly once where the data lands, with no window at all, as
river's JobCompleteTx gives jobs. Within a run, the rows are not visible
in the table before the partition's finish: a downstream asset reads its
inputs through [tranche.Materialization.Input], not from the table.

A destination apart from the ledger (OpenDestination, or a run outside a
ledger) commits each write in a transaction of its own, with the token
check: the newest attempt wins and a stale write is refused, so a
replacing table ends with the rows of the attempt that succeeded; but a
worker killed after its write and before its finish has written, and an
appending table then holds that attempt's rows beside the next's (the
at-least-once delivery of any destination that does not share the
ledger's transaction; deduplicate by the delivery id).
*/
package sqldest
