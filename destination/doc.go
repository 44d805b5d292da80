// Package destination is the contract between tranche's runner and the
// destinations that store assets' rows, as database/sql/driver is
// between database/sql and its drivers, and package ledger between
// backfills and ledgers: the rules of the root package's
// [tranche.Destination] interface and its [tranche.Batch], the
// fencing-token rules, and [Fence.Admit], the one rule by which a fenced
// destination admits or refuses a write. Every shipped destination calls it (the root's
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
// carries a fencing token (the Token of [tranche.Batch]): the ledger's token of the
// claim that wrote it, which grows with each claim of the partition,
// and the identity of the DAG that claimed it (its DAG). What a
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
//     have a delivery id of their own ([DeliveryID]), the same only
//     for deliveries of one attempt's write. Such a destination appends
//     each batch's rows with its partition, token, DAG identity and
//     [DeliveryID], and its readers keep, per partition, the rows of the
//     one delivery a replacing destination would hold ([Newest]): no
//     partition is then seen twice, whatever was appended.
//
// # The tokens
//
// A ledger's token of a claim (ledger.Lease.Tokens) is the instant the
// ledger granted it, by the ledger's clock, in milliseconds, shifted
// left by 20 bits, plus the attempt number: a claim granted later has
// the higher token, whatever DAG identity made it. A takeover is granted
// only once the lease it takes over has expired, and a rerun once the
// attempt it reruns has finished, so the newest attempt of a partition
// always holds its highest token. Tokens are opaque otherwise: compare
// them by the rule, never count on their values (ledger.TokenAttempt
// reads the attempt number back).
//
// The rule that compares them is written once, in the documentation of
// [Fence.Admit], which every fenced destination calls (and, for readers
// of the repository, in docs/destinations.md, "Fences: one rule"): within
// one DAG identity the attempt numbers decide, across identities the
// whole tokens. A destination that follows a rule of its own (comparing
// tokens within one identity only, say, and letting another identity
// replace the partition) lets a worker of the old code overwrite what a
// deploy's new code landed.
//
// # Deploys and rollbacks
//
// A deploy that changes the DAG (an asset added, a dependency moved)
// gives it a new identity, whose ledger history starts empty: its
// backfill runs every partition again, and its claims, granted after
// every claim of the old identity, outrank them. A worker of the old
// code paused in the middle of a write when the new code wrote the
// partition is refused when it resumes: no write of an attempt that is
// not the partition's newest claim replaces the partition, whichever
// identity made either. The newest claim wins, and that is also what a
// rollback is: running the old code again claims the partitions anew,
// and its writes replace the new code's.
//
// It follows that a backfill of the old identity still running after a
// deploy keeps claiming partitions, the ones the new code landed among
// them (they are not succeeded under the old identity), and its newer
// claims replace the new code's rows. Stop the old identity's backfills
// when deploying (ledger.Writer.CancelBackfill with stopRunning, or
// tranche cancel): the workers stop their running partitions at their
// next heartbeat, and claim nothing more. docs/destinations.md says
// more.
package destination
