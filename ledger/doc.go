// Package ledger is the contract between tranche's backfills and the
// stores that record them, as database/sql/driver is between database/sql
// and its drivers: the [Ledger] interface, the requests and records that
// cross it ([ClaimRequest], [Lease], [Outcome], [Attempt],
// [BackfillRecord]), and the rules every implementation shares
// ([ClaimRequest.Validate], [ClaimRequest.Judge] and
// [ClaimRequest.Admits], [Lease.CheckHeld], [Lease.CheckOutcomes],
// [TakeoverReason]), so that each applies them alike and a backfill's
// plan agrees with the ledger that executes it.
//
// A deploy that changes a DAG changes its identity, and so starts its
// history afresh. The identities whose backfills record one DAG name
// ([BackfillRecord.DAGName]; [BackfillRecord.Versions]) are versions of
// one DAG: a backfill's claim of a partition that another version landed
// after the backfill was created is refused ([ClaimRequest.JudgeVersion],
// [ErrSuperseded]), unless under [RerunAll], so that the old code's
// backfill, going on through a deploy, never replaces the new code's
// rows, while a rollback (RerunAll, or a backfill created after the
// deploy) may.
//
// A [Ledger] is a [Reader], a [Leaser] and a [Writer], composed as
// io.ReadWriter is, so that code which only reads (a status, a page)
// asks for a Reader alone. A ledger may also be a [LatestReader], an
// optional interface as io.WriterTo is to an io.Reader: it counts latest
// attempts where it keeps them, grouped by what [ClaimRequest.Judge]
// reads, so that a backfill's status, grid and plan cost a query, not a
// read of every attempt. Package backfill falls back to [Reader.Latest] for a ledger
// without it. A [BriefReader], optional too, reads each partition's
// latest attempt in brief ([Brief]: its start, state and instants), all
// that the status of a DAG of several granularities weighs of each of a
// million partitions.
//
// Operators name a ledger by an address (sqlite:PATH, postgres://…),
// which package ledger/address reads.
//
// A ledger author imports this package and its conformance suite,
// ledger/ledgertest, and nothing that runs assets. The package knows
// nothing of DAGs or runs: a DAG is named by its identity, a string. The
// implementations are ledger/memledger (in memory), the module
// ledger/sqlite and the module ledger/postgres (through the package
// sqlledger).
package ledger
