/*
Package trancheotel turns tranche's events into OpenTelemetry traces and
metrics. [NewHook] returns a hook for [tranche.Runner.OnEvent],
[backfill.Backfill.OnEvent] and [schedule.Scheduler.OnEvent]:

	hook := trancheotel.NewHook(trancheotel.WithDAG("daily-sales"))
	runner := &tranche.Runner{OnEvent: hook}
	backfill := &backfill.Backfill{DAG: dag, Window: w, Ledger: ledger, Runner: runner, OnEvent: hook}

The providers default to otel's global ones ([otel.GetTracerProvider],
[otel.GetMeterProvider]), or are given with [WithTracerProvider] and
[WithMeterProvider].

# Traces

Each run is a span ("run", or "run NAME" with [WithDAG]), a child of the
span in the context given to Runner.Run or Backfill.Run if there is one:
start a span around Backfill.Run to gather a backfill's runs into one
trace, or leave it out for a trace per run. Each attempt of an asset is a
child span of its run ("asset NAME"), and each write to a destination a
child of its attempt ("write DESTINATION"). Their times are the events'.

The run's span carries tranche.run.id, tranche.run.attempt,
tranche.backfill.id (for a backfill's run), tranche.trigger (live,
catch-up, backfill or manual, for a run a ledger records), tranche.dag (with WithDAG, or
else, for a backfill's run, the DAG name its backfill's events carry), and
tranche.partition.key (a partition run's key) or tranche.window (a window
run's text form); an attempt's, tranche.asset and tranche.asset.attempt; a
write's, tranche.destination. When a step ends its span gets
tranche.status (succeeded, failed, canceled, skipped, or retrying for an
attempt followed by another), and tranche.rows for runs, completed attempts
and writes. A failed or canceled step, and an attempt that is retried, has
status Error with its error recorded ([trace.Span.RecordError]); a skipped
asset is not an error. An asset settled without running (canceled or
skipped for its dependencies) is an event of the run's span, as is an
event of a kind this package does not know.

Every span a run opened is ended by the run's end, whether it completed,
failed or was canceled, and the hook then forgets the run: it holds state
only for the runs in progress. A run that the sampler drops takes no state
at all.

# Metrics

	tranche.run.duration         histogram, s          tranche.status, tranche.trigger (of a recorded run)
	tranche.asset.duration       histogram, s          tranche.asset, tranche.status
	tranche.write.duration       histogram, s          tranche.asset, tranche.destination, tranche.status
	tranche.write.rows           counter, {row}        tranche.asset, tranche.destination
	tranche.backfill.partitions  counter, {partition}  tranche.partition.state
	tranche.schedule.lag         histogram, s          tranche.trigger
	tranche.schedule.slots       counter, {slot}       tranche.slot.state
	tranche.schedule.queued      gauge, {slot}
	tranche.schedule.upstream    counter, {slot}       tranche.slot.upstream

with tranche.dag as well under WithDAG; without it, the partition
counts take tranche.dag from the backfill's events, which name the DAG
(tranche.DAG.Name), as do the scheduler's measurements. An asset's duration covers all
its attempts in the run; a retried attempt is not measured apart. The
partition counts come from the backfill's events: tranche.partition.state
is succeeded, failed, held (another worker held its lease) or skipped
(already succeeded), and a chunk counts its partitions. A scheduler's
come from its events: the lag is from a slot's close to its claim (its
slot.claimed event), by trigger (live or catch-up); tranche.slot.state
is succeeded, failed, missed (older than the catch-up window), skipped
(by the overlap policy) or canceled (stopped by a later slot under
cancel-other); the queue is recorded as it changes. Of a DAG of several
granularities, whose assets' schedulers name their DAG "DAG/asset",
tranche.slot.upstream counts a slot waiting for the partitions it maps
to (waiting, once a slot), run at its deadline without them (late,
Scheduler.RunLate), or run again because one of them was materialized
again after it ran (stale, Scheduler.RerunStale). Run and backfill
ids are not metric attributes: each would be a new series. A run's, an
asset's and a write's measurements are made in the context of their
span, so that a sampled one's exemplar points to it.

# Cost

A provider that records nothing is not used: otel's no-op providers, and
the global ones while unset. With neither provider in use, NewHook returns
nil, which the runner takes for no hook at all, so that a program that sets
no provider pays nothing, not even for building events. With a provider,
measurements are skipped while an instrument is disabled
([metric.Int64Counter.Enabled]), their attribute sets are built once per
asset, destination and status (up to 4,096 of them), and a run the sampler
drops costs one span start and takes no state.
BENCHMARKS.md gives the hook's cost on a run of no-op assets.

Logs are not turned into span events: route an asset's logger
([tranche.Materialization.Logger], through [tranche.Runner.Logger]) to an
OpenTelemetry log bridge instead.
*/
package trancheotel
