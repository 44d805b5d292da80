/*
Package tranche divides time into partitions, groups them into windows,
and computes trailing lookback windows, exactly, in any time zone and across
every daylight-saving transition.

Every span in tranche is half-open: a partition is [Start, End), a window
runs from the start of its oldest partition to the end of its newest, and
End is the first instant after it. Partitions follow the wall clock of a
location: a day is a calendar day (23 or 25 hours on DST days), an hourly
partition starts on the local hour, and the location is the one of the
time you pass in.

# Partitions

A [TimeGranularity] is one of [Minute], [Hour], [Day], [Week] (ISO, from
Monday), [Month], [Quarter] and [Year], or a multiple made with [Every]
("15m", "6h", "2w" with [ParseGranularity]). [PartitionOf] returns the
partition that holds an instant; [TimePartition.Next] and
[TimePartition.Prev] step through time; [TimePartition.Key] names a
partition ("2024-03-10", "2024-W10", "2024-11-03T01:00-05:00") and
[ParsePartitionKey] reads the name back.

The rules, for a granularity in a location:

  - Partitions tile time: every instant lies in exactly one, each ends where
    the next starts, none is empty.
  - Minute and Hour multiples are buckets of the local wall time: n must
    divide 60 (minutes) or 24 (hours), and a partition starts where the
    bucket changes and wherever the clock is set back onto a bucket
    boundary. New York's 2026-11-01 has 25 hourly partitions, two at local
    01:00 (-04:00, then -05:00), and its 2026-03-08 has 23.
  - Day and coarser partitions start at the first instant of their first
    date: local midnight, or the first instant that exists when midnight is
    skipped. A clock set back never reopens a finished day, and a date that
    never occurs (Pacific/Apia, 2011-12-30) has no partition.
  - Multiples are aligned to the calendar, not to the data: Every(3, Day)
    counts days from 1970-01-01, Every(2, Week) ISO weeks from the week of
    1969-12-29, Every(3, Month) months from January.

# Windows and lookback

A [TimePartitionWindow] is a lazy run of consecutive partitions, built with
[NewTimePartitionWindow] (from the partition holding one instant to the one
holding another), [WindowBetween] (half-open bounds that must lie on
partition boundaries, as schedulers pass them) or [Lookback] (the trailing
window a daily job re-materializes). [TimePartitionWindow.All] ranges over
it newest first, the order backfills use so that an interrupted run leaves
recent data in place; [TimePartitionWindow.OldestFirst] is the other order;
[TimePartitionWindow.Chunks] splits it into sub-windows. Ranging allocates
nothing per partition and [TimePartitionWindow.Len] costs nothing, so a
century of minutes is as cheap to hold as a day.

Bounds given as text go through [ParseBound], which insists on an offset or
a zone: "2026-01-01" alone is ambiguous by up to a day. A bound written with
an offset keeps it, as [time.UTC] for a zero offset ("Z" and "+00:00" are one
bound) or a fixed zone named by the offset ("+01:00"), never time.Local, so
the window between two such bounds, and the backfill it names, are the same
on every host.

# Text forms and zones

Windows, partitions and granularities have a text form each, which their
MarshalText and UnmarshalText write and read, so that they travel in JSON
and configs: "day 2024-01-01..2024-01-31 America/New_York",
"hour 2024-11-03T01:00-05:00 America/New_York", "15m". The zero value of
each marshals to empty text, and empty text unmarshals to it. A zone is
written by its zone database name, or for a fixed offset without one by the
offset ("day 2026-01-01..2026-01-31 +01:00", "UTC" for zero); identities
(backfill.DAGIdentity) name zones the same way. Nothing that names a backfill, a
DAG or a window depends on the host's zone: time.Local on a host with
daylight saving time and without TZ has no portable name, so the text forms
refuse it ("Local"); load zones by name with [time.LoadLocation].

# Assets

An [Asset] is a named piece of data and the work that makes it: its
[Asset.Deps] (other assets, by name), an optional [Partitioning]
(granularity, location, the partition column of its rows, whether it takes
whole windows, its first partition), optional [Destination] values, a
per-attempt [Asset.Timeout], a [Retry] policy, and [Asset.Materialize]:
the function that returns the asset's rows ([Row], column names to
values). The [Materialization] it receives names the partition or
window, the run, the rows of its dependencies ([Materialization.Input])
and a [*slog.Logger] whose records become events, tagged with the
attempt.

[NewDAG] validates assets before anything runs and reports every problem
at once: unique, non-empty names, dependencies that exist and are not the
asset itself, no cycle (each shown), no partitioned asset feeding an
unpartitioned one, one granularity along each dependency. NewDAG() with no
assets is the empty DAG, whose runs complete at once. [DAG.Assets] lists
the assets in dependency order, ties broken by name.

# Running

[Runner.Run] materializes a DAG for a [Target]: a [TimePartition], a
[TimePartitionWindow], or nil when no asset is partitioned. Assets run in
dependency order, independent ones concurrently up to
[Runner.MaxConcurrentAssets]. A window run calls each asset once with the whole
window, and is refused unless every partitioned asset allows windows;
targets reaching before an asset's first partition are refused with a
[*PartitionError]; both before any event. A failure cancels the running
assets ([FailStop], the default), or only the assets downstream of it
([FailContinue]): [Runner.OnFailure] is the [FailurePolicy] that a
backfill's OnFailure is too, for its partitions. A panic fails its asset with a [*PanicError]; an error
wrapped with [Retryable], or a timeout, is retried with exponential
backoff. The [Result] reports every asset's [AssetResult].

After an asset succeeds, each of its destinations receives one [Batch]
per partition of the run (the rows split by the partition column, empty
partitions included); a batch replaces its partition, so re-running never
duplicates rows. A row outside the run's partitions fails the asset before
anything is written. [MemoryDestination] keeps rows in memory; the
package destination/files writes JSON lines, one file per partition,
replaced atomically, and the other destinations live in packages of
their own (destination/parquet, destination/duckdb, sqldest).

Every batch carries a fencing token ([Batch.Token]), the ledger's number
of the attempt that wrote it, and what lands depends on the kind of
destination (see [Destination]):

  - transactional destinations sharing the ledger's database (the SQL
    destinations, in their own modules) commit the rows and the ledger's
    record of success in one transaction: exactly once, with no window;
  - fenced replacing destinations ([MemoryDestination], the files
    destination) refuse a write older than the partition's last,
    atomically with the write: the newest attempt wins, and a stalled
    worker's rows never replace a newer attempt's;
  - other destinations receive each attempt's batches at least once, with
    the token and a delivery id (destination.DeliveryID): package
    destination says how their readers keep each partition once.

A plain [Runner.Run] writes with token 0, which is not fenced.

# Events

Every step of a run is an [Event] of a stable [Kind] (run, asset, write
and log events; backfills add theirs), delivered synchronously and in
order to [Runner.OnEvent], a plain function; every event of a run has been
delivered when Run returns, and a hook that panics is recovered and
reported in [Result.HookErr]. [SlogHook] logs events with [log/slog];
the package eventlog writes them as JSON lines; [Hooks] combines hooks. Event ids
([Event.ID]) are deterministic. The package tranchetest records events and
checks results in tests.

# Schedules

[ParseCron] makes a cron schedule a granularity: each fire time closes a
slot that began at the previous fire, so the slots of "0 2 * * *" are
[yesterday 02:00, today 02:00), and a slot's key is its fire time. A
schedule with fixed hours fires once per local day across daylight saving
time; one whose hour field is a wildcard (every hour, or every n hours)
fires at every real matching instant. Excluded dates (holidays) have no
slot: the next slot covers them.
[SlotWindow] reads backfill bounds as people type them, a date as the end
meaning through the end of that day, and leaves the fires of the current
minute to the live schedule; [SlotAt] names one slot by its fire time,
in the schedule's CRON_TZ zone whatever offset spells it, so that it is
the slot SlotWindow holds, under the same DAG identity; and a backfill
of chosen slots (backfill.Backfill.Partitions) takes several, in any
order.

A moved schedule keeps its history. A schedule that fires once a day on
the days it fires ("0 2 * * 1-5"), or once in every hour of them
("5 * * * *"), is named in a DAG's identity by that cadence, its days, its
CRON_TZ zone and its excluded dates, not by its minute and hour: after
"0 2 * * *" moves to "0 1 * * *", a plan matches each slot to the attempts
of every slot that fired on the same local date (or in the same local
hour), taking the one changed last, so the days the old schedule covered
are not planned again. Every other granularity keeps the identity it had.

# Resumable backfills

Backfills live in the package backfill, on top of this one: a
backfill.Backfill runs a DAG over every partition of a window through
[Runner.RunWith], claiming its partitions in a ledger (the package ledger
is the contract every ledger implements; ledger/memledger keeps one in
memory, the modules ledger/sqlite and ledger/postgres in a database), so
that running it again resumes it and several workers share it. This
package knows nothing of backfills or ledgers: [RunOptions] is what any
scheduler, a backfill among them, chooses of a run (its id, attempt and
the fencing tokens of its writes). backfill.DAGIdentity is the stable
hash a ledger keys a DAG's history by, which a scheduler passes as
[RunOptions].DAG.

# Packages

	tranche              partitions, windows, schedules, assets, DAGs, the runner, events, the in-memory destination
	tranche/backfill     resumable backfills: plans, results, status and its calendar grid, watching, the progress reporter
	tranche/destination/files  the JSON-lines destination, one file per partition
	tranche/eventlog     events written as JSON lines
	tranche/ledger       the ledger contract: the interface and the claim rules every ledger shares
	tranche/ledger/ledgertest  the ledger conformance suite
	tranche/ledger/memledger   a ledger in memory
	tranche/sqlledger    the SQL ledger the SQLite and PostgreSQL modules share
	tranche/sqldest      SQL destinations that commit with the ledger
	tranche/tranchecli   the command line of a program's backfills: plan, run, status, watch, history, cancel, resume
	tranche/trancheweb   a ledger's backfills and DAGs as web pages: counts, progress, the grid, histories
	tranche/tranchetest  test helpers for programs that use tranche

The module cmd/tranche is the operator's command: tranchecli and
trancheweb over a ledger named by a URL (sqlite:PATH, postgres://...).

# Testing

The package tranchetest, for the tests of programs that use tranche,
records events, holds an in-memory destination, builds DAGs from plain
functions and asserts on results with testing.TB; the package
ledger/ledgertest checks any ledger implementation.

# Errors

Every refusal names the value and says what would be accepted. Text that
a parser refuses (a bound, a partition key, a granularity, a cron
expression, a window's or partition's text form) is a [*ParseError] whose
Type, Text and Reason say what was parsed and what was wrong ("month 13 is
out of range (01 to 12)"). A window reaching before an
asset's first partition is a [*PartitionError]. A failed asset is an
[*AssetError] wrapping the asset's own error; a panic is a [*PanicError]
with its stack.
*/
package tranche
