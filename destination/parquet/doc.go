// Package parquet is a [tranche.Destination] that writes each partition
// of an asset as one Parquet file in Hive-style folders, which DuckDB,
// Spark, Trino, Polars and the other lake engines read as one table. It
// runs on github.com/parquet-go/parquet-go, in pure Go, and lives in its
// own module so that tranche itself does not carry it.
//
//	lake := &parquet.Destination{Dir: "lake", Schemas: map[string]parquet.Schema{
//		"orders": {Columns: []parquet.Column{
//			{Name: "id", Type: column.Int},
//			{Name: "amount", Type: column.Float},
//			{Name: "customer", Type: column.String, Null: true},
//			{Name: "placed_at", Type: column.Time},
//		}},
//	}}
//	asset := tranche.Asset{Name: "orders", Destinations: []tranche.Destination{lake}, ...}
//
// # Layout
//
// A partition of an asset partitioned on column COLUMN is the file
// DIR/ASSET/COLUMN=KEY/part-00000.parquet, KEY being the partition's key
// (2026-01-01 for a day); an unpartitioned asset's rows are
// DIR/ASSET/part-00000.parquet. Names are escaped for any file system
// as the JSON-lines destination (destination/files) escapes them: bytes other than letters,
// digits, '-', '_', '.' and '+' become %XX, which Hive readers decode, so
// the hourly key 2026-11-01T01:00-05:00 is the folder
// hour=2026-11-01T01%3A00-05%3A00 and reads back as the key. DuckDB reads
// an asset with
//
//	SELECT * FROM read_parquet('DIR/ASSET/*/*.parquet', hive_partitioning = true)
//
// The partition column is in the folder names, not in the files, as Hive
// layouts have it: readers take it from the folder (DuckDB types a day's
// key as a DATE), and DuckDB prefers the folder's value to a file column
// of the same name. A row's value in it says only which partition the
// row belongs to: an asset that partitions on event times and wants
// them kept puts them in a column of their own as well.
//
// Beside the part file, a partition's folder holds .lock, which every
// write of the partition locks, and, for a partition that has no part
// file (see Writes), .fence, which keeps its fence. Readers skip them:
// DuckDB's *.parquet globs never match them, and Spark, Trino and Hive
// skip names starting with a dot.
//
// # Schemas
//
// [Destination.Schemas] declares an asset's columns, in their order in
// the files, each of a [column.Type] and nullable or not. Every row of a batch
// must fit: each value of a Go type its column's type takes, null (nil,
// or a missing key) only where the column allows it, and no key that is
// not a column but the partition column. An asset without a declared
// schema has one inferred from each batch's rows: a nullable column for
// every key, of the kind of its first non-nil value (Float when a column
// holds both integers and floats), in the order of the columns' names.
// Every row is then checked against it, so that a column holding an int
// in one row and a string in another refuses the batch. Inferred schemas
// follow the rows, so partitions may differ (a column that is always nil
// in one is missing from it): read them with union_by_name = true, or
// declare the schema, as a table that other systems read should.
//
// A refused row fails the whole write with a [*column.ValueError] that
// names the asset, the partition, the row, the column, the value and what
// would be accepted, matching [column.ErrMistyped], [column.ErrNull] or
// [column.ErrUnknownColumn]. The rows are checked before anything touches
// the disk, so a refused write leaves every partition as it was, and
// creates no folder.
//
// The column types are package destination/column's, which the SQL
// destinations share. A String must be valid UTF-8 (a Bytes column takes
// other bytes). Values are written as these Parquet types: Int as INT64
// (DuckDB's BIGINT), Float as DOUBLE, String as STRING (VARCHAR), Bool as
// BOOLEAN, Time as a TIMESTAMP of microseconds adjusted to UTC, the unit
// that DuckDB, Spark and Trino all read (its nanoseconds are dropped,
// rounding toward the past, and its zone is not kept), and Bytes as
// BYTE_ARRAY (BLOB). Each file records, in its key-value metadata, the
// asset (tranche.asset), the partition's key (tranche.partition), the run
// id (tranche.run_id), the token (tranche.token) and the delivery id
// (tranche.delivery_id) of the write that made it, and the partition's
// fence (tranche.fence, see Fencing); DuckDB shows them with
// parquet_kv_metadata.
//
// # Writes
//
// A write checks and converts every batch's rows, then, for each
// partition: creates its folder if missing (syncing the folder that holds
// it), takes the exclusive flock(2) of its .lock, in the order of the
// folders' names so that writers of overlapping partitions cannot
// deadlock, checks its fence, and writes the new part file as a
// temporary file in the same folder, synced to disk. Only when every
// partition is ready does it rename each temporary file over the part
// file and sync the folder, so a row refused, a stale token, a full disk
// or a canceled context leaves every partition as it was, and a process
// killed at any point, or a machine that loses power, leaves each
// partition's old file or its new one, never part of one. A reader sees
// one part file per partition at every instant: the rename replaces it
// in one step. The temporary files of a writer that died are removed by
// the next write of the partition, which holds the lock that every
// writer of it holds while it has any.
//
// An empty partition is a file of no rows with a declared schema; with an
// inferred one, which has no columns to write, it has no part file, and
// its fence is kept in .fence (renamed into place, synced, before the
// part file is removed).
//
// # Fencing
//
// The destination is fenced by [tranche.Batch.Token], the ledger's
// token of the claim that wrote it, by the rule every destination shares
// (destination.Fence.Admit): a write that it finds stale is refused
// with a [*tranche.StaleWriteError], matching [tranche.ErrFenced],
// leaving every partition of the write as it was. A worker that stalled past its lease, while another took the
// partition over and wrote it, cannot then overwrite the newer rows. The
// same token is admitted again (a redelivery of the same attempt's
// write); a write with token 0, which a run outside a ledger makes, is
// not fenced and keeps the fence. The fence is in the part file's own
// metadata (tranche.fence), so the rename that replaces the rows
// replaces the fence in the same step, and the write syncs one file, not
// two. The check and the renames happen under
// the partition's lock, so they hold between processes, and between
// machines sharing a file system whose locks do. On systems without
// flock(2) (Windows), the lock, and so the fence, hold only between the
// writes of one Destination value.
//
// Tokens compare by the one rule of destination.Fence.Admit, within a
// DAG identity ([tranche.Batch.DAG]) and across a deploy's identities
// alike.
package parquet
