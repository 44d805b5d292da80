/*
Package schedule keeps a DAG current: a [Scheduler] runs each slot of the
DAG's granularity (a partition, or a cron schedule's slot) once it has
closed, records it in a [ledger.Ledger] as a backfill records its
partitions, and runs until its context ends.

	s := &schedule.Scheduler{DAG: dag, Ledger: l}
	err := s.Run(ctx)

Slots are the library's partitions: a day closes at the next local
midnight of its zone, across DST days too, an hour at the next local hour
(New York's 2026-11-01 has 25, two at 01:00), a cron slot at its fire
([tranche.ParseCron]; excluded holidays have no slot, and the next covers
them). Delay runs each slot later than its close ("the day, two hours
after it ends").

Any number of schedulers share one ledger, in one process or many: each
due slot is claimed under a lease, and the ledger lets one claim win, so
each slot runs once; a scheduler that dies mid-slot loses it to another
when its lease expires. Backfills of the same DAG share the history: a
slot a backfill holds or ran is not run again, and a backfill skips what
the scheduler landed. In one process, a [backfill.Budget] that a
scheduler and backfills share ([Scheduler].Budget) bounds their runs and
puts the live slots first.

After downtime the missed slots within a catch-up window run, oldest
first, and older missed slots are reported ([KindMissed],
[Status].Missed), for a backfill to run. [Overlap] says what a slot that
comes due while an earlier one still runs does. Every event goes to
[Scheduler.OnEvent], those of a slot with the [ledger.Trigger] that started it.

A DAG whose assets have several granularities (hourly events, a daily
rollup) runs asset by asset, each on its own slots, recorded as a
backfill records each asset ([backfill.AssetDAG]): a slot runs once the
partitions it maps to have succeeded ([KindWaiting] until then), with a
deadline ([Scheduler].WaitUpstream), and, with RerunStale, again when
one of them lands again after it ran ([KindStale]).

The guide docs/scheduling.md, in the repository, says what a scheduler
does and what it does not: it is not a distributed cron for arbitrary
jobs.

# Why a package of its own

A scheduler is a long-lived loop over a clock, with policies (catch-up,
overlap) that mean nothing to a backfill's finite window, and it needs
both the ledger and backfill's identities, which the root package never
imports. In package backfill it would add a dozen names to the page every
backfill author reads; here it has its own, and package backfill keeps
what a window needs. Its clock is injected (Scheduler.Now and After), so
tests run days of slots in milliseconds under testing/synctest.
*/
package schedule
