// Package destination is the contract between tranche's runner and the
// destinations that store assets' rows, as database/sql/driver is
// between database/sql and its drivers, and package ledger between
// backfills and ledgers: the [Destination] interface and its [Batch]
// (the root package's, under the same names), the fencing-token rules,
// and [Fence.Admit], the one rule by which a fenced destination admits or
// refuses a write. Every shipped destination calls it (the root's
// tranche.MemoryDestination through the same internal rule), and so
// should a user's own; package destination/destinationtest checks a
// destination against this contract in one test.
//
// The shipped destinations: tranche.MemoryDestination (in memory),
// package destination/files (JSON lines), the SQL destinations of package
// sqldest (made by the SQLite and PostgreSQL ledger modules), and the
// modules destination/duckdb and destination/parquet.
//
// # Writes
//
// After each successful call of an asset, the runner calls Write once per
// destination of the asset, with one Batch per partition of the run,
// oldest first: one batch for a single-partition run, one for each
// partition of a window, including the partitions with no rows, and one
// batch without a partition for an unpartitioned asset. Each batch
// replaces what the destination held for that asset and partition (for an
// unpartitioned asset, all it held), so running the same partition again
// never duplicates rows.
//
// The runner has already checked that every row holds its partition; a
// destination checks that the rows suit it (their shape, their types) and
// checks every batch before storing any, so that a refused write leaves
// every partition as it was. Write may be called from several goroutines
// at once, for different assets or runs, and, when workers race, for the
// same partition. A canceled context stops a write before it stores
// anything, or leaves it whole. Events name a destination by its String
// method when it has one ([fmt.Stringer]), and by its type otherwise.
//
// # What lands, and how often
//
// A backfill claims each partition in its ledger before it runs it, and a
// worker writes only while its lease holds by its own clock. That alone
// cannot make a write land exactly once: a worker may be paused (a long
// garbage collection, a frozen machine) after its last check and write
// once it resumes, after another worker took the partition over; and a
// worker killed between its write and the ledger's record of it leaves a
// partition that the next attempt writes again. Every batch therefore
// carries a fencing token ([Batch.Token]): the ledger's number of the
// attempt that wrote it, which grows with each attempt at the partition,
// and the identity of the DAG that numbered it ([Batch.DAG]). What a
// destination guarantees depends on what it does with them:
//
//   - Transactional destinations sharing the ledger's database (the SQL
//     destinations made with a ledger) commit the rows, the token check
//     and the ledger's record of success in one transaction: each
//     partition lands exactly once, and its data and its state in the
//     ledger never disagree.
//   - Fenced replacing destinations (tranche.MemoryDestination, the files
//     and Parquet destinations, DuckDB, and a SQL destination apart from
//     the ledger) keep each partition's [Fence] beside its data and
//     replace a partition only with a write that [Fence.Admit] admits,
//     checked atomically with the write: a stale token is refused with an
//     error matching [tranche.ErrFenced], and nothing of the write lands.
//     The newest attempt wins: a stale worker's rows never replace a newer
//     attempt's, and a partition written twice holds one attempt's rows.
//     The ledger may still record an attempt failed whose rows landed
//     (the worker died before recording it); the next attempt replaces
//     them.
//   - Other destinations (appending ones, queues, APIs) receive each
//     attempt's batches at least once, and more than once when a worker
//     dies between its write and its record, and every attempt's batches
//     have a delivery id of their own ([Batch.DeliveryID]), the same only
//     for deliveries of one attempt's write. Such a destination keeps
//     Admit's rule per partition to refuse a stalled worker's writes, and
//     its readers keep, per partition, only the rows of the newest token
//     they hold.
//
// # The tokens
//
// [Fence.Admit] decides by these rules, which every fenced destination
// shares:
//
//   - Token 0 is a write outside any ledger (a plain tranche.Runner.Run,
//     or an unpartitioned asset): it is not fenced, replaces its
//     partition whatever token wrote it last, and keeps that token, so
//     that a stale attempt is still refused after it.
//   - A token below the partition's fence, under the fence's DAG
//     identity, is stale: the attempt that wrote it was taken over, and
//     the write is refused with a [*tranche.StaleWriteError].
//   - A token at or above the fence, under its identity, is admitted and
//     becomes the fence: the same attempt delivering again, or a newer
//     one.
//   - A write under another DAG identity (the DAG changed: an asset
//     added, a dependency moved) is admitted and becomes the fence, since
//     the ledger numbers each identity's attempts apart, from 1, and runs
//     the partition for both. This is the deploy rule: docs/destinations.md
//     says what it leaves open while workers of two versions share a
//     backfill.
package destination
