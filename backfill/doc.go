/*
Package backfill runs a [tranche.DAG] over the partitions of a window,
resumably: a [Backfill] claims partitions in a [ledger.Ledger] in its
order, in batches ([ledger.Leaser.ClaimNext]), each under a heartbeated
lease, starts them in the order of claims (through
[tranche.Runner.RunWith], with the lease's fencing tokens) and records how
each ended.

A [Backfill] materializes a DAG over every partition of a window, claiming
its partitions in a [ledger.Ledger] under heartbeated leases and recording
how each ended, so that running the same backfill again resumes
it, and several workers share one backfill with every partition landing
once in the ledger. [Backfill.Plan] is a dry run; [Backfill.Run] plans
and executes; [Backfill.Execute] refuses a plan whose partitions' history
changed since it was made; [StatusOf] reads a backfill's progress and why
it is stuck, if it is. A backfill of chosen partitions
([Backfill.Partitions]) is one backfill with one id ([IDOf]). A
backfill with nothing to run is not recorded. [ledger.Writer.CancelBackfill]
stops a backfill's claims everywhere (and, with [ledger.CancelOptions].StopRunning, its running
partitions at their next heartbeat) and [Backfill.Resume] lets them go
on, running what has not succeeded. Under [tranche.FailStop] a failure
stops the partitions after it in the backfill's order, whatever the
concurrency: those before it still run. Plans estimate their duration from
the DAG's recent successes ([ledger.Reader.RecentSuccesses]), wherever they lie.

Reading needs a [ledger.Reader] alone. Of one backfill: [StatusOf], its
counts and why it is stuck; [GridOf], that status with its grid, counted
once; [CountStatus], the counts alone, for a list of backfills; [Watch],
the status as it changes. Of a window of a DAG, across its backfills and
runs: [WindowStatus] and [WindowGrid]. Of a DAG: [SummaryOf], its
backfills, latest run and scheduler, and [RunSummary], those without the
backfills, for a page that lists them itself.

Each running partition renews its lease on its own, so that a hung ledger
call holds up no other; a worker trusts a lease by its own clock only for
its length less a margin since its last renewal, and past that stops the
partition and writes nothing more for it. A run reports apart the
partitions other workers still hold ([Report].Held, which is not an
error: [Report.Done] says whether the backfill is done, and
[Backfill.WaitForOthers] waits for them) and those whose claims failed
([Report].Unclaimed, an error).

A deploy that changes the DAG gives it a new identity. A backfill leaves
the partitions that another version of its DAG (an identity whose
backfills record the same [tranche.DAG].Name) landed after the backfill
was created: its plan shows them as [ledger.ActionSkipSuperseded], the ledger
refuses their claims ([ledger.ErrSuperseded]) and the run counts them
skipped ([Report].Superseded), so that the old code's backfill, going on
through a deploy, never replaces the new code's rows. A rollback reruns
them under RerunAll, or from a backfill created after the deploy.

A DAG whose assets have several granularities (hourly events, a daily
rollup, a monthly report) is backfilled asset by asset: each asset's
partitions inside the window, recorded under the asset's own identity
([AssetPlan].DAG), in waves of assets, a partition once every partition
it maps to ([tranche.Mapping]) has succeeded, reading them through
[tranche.Runner.Read]. The plan says per asset what runs and why
([Plan].Assets, [ActionBlocked]); a partition whose upstream succeeded
again after it began is stale, which [ledger.RerunStale] runs again with
its dependents; [AssetsOf] reads the whole DAG's state.

[ID], [RunID] and [DAGIdentity] are stable hashes. memledger.New
keeps a ledger in memory; the modules ledger/sqlite and ledger/postgres
keep it in a database through the package sqlledger. [NewProgressReporter]
shows progress on a terminal.

# Events

A backfill emits the [tranche.Event] values of its runs and its own kinds
around them ([KindStarted], [KindPartitionClaimed], ...), with
[tranche.Event.Backfill] and [tranche.Event.Progress] set, to its OnEvent
hook under the contract of [tranche.Runner.OnEvent]. [NewProgressReporter]
shows progress on a terminal.
*/
package backfill
