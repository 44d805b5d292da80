package backfill

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tranche-dev/tranche"
)

// The bounds of a backfill as an operator types them, read by one rule
// wherever they are typed: tranchecli's --from and --to, trancheweb's
// plan form and DAG page, and a program that calls these.

// PartitioningOf returns the granularity of dag's partitioned assets and
// the zone its backfills are in: the Partitioning.Location its assets
// name, UTC when none does (a cron schedule's CRON_TZ still places its
// slots). For a DAG of several granularities, which a backfill runs asset
// by asset over each asset's partitions inside its window, it returns
// the finest, so that a window of it ends where a span typed ends. It
// fails when no asset is partitioned, when they are partitioned in two
// zones (a backfill takes one), or by two granularities one of which is
// a cron schedule.
func PartitioningOf(dag *tranche.DAG) (tranche.TimeGranularity, *time.Location, error) {
	var g tranche.TimeGranularity
	var loc *time.Location
	var from string
	// A partition's length at a fixed instant orders granularities by
	// fineness; calendar lengths vary, but never enough to reorder them.
	ref := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	length := func(g tranche.TimeGranularity) time.Duration {
		p := tranche.PartitionOf(g, ref)
		return p.End.Sub(p.Start)
	}
	for a := range dag.Assets() {
		pt := a.Partitioning
		if !pt.Granularity.IsValid() {
			continue
		}
		if g.IsValid() && pt.Granularity != g && (g.IsSchedule() || pt.Granularity.IsSchedule()) {
			return g, nil, fmt.Errorf("tranche: its assets %s (%v) and %s (%v) are partitioned differently, by a cron schedule; a backfill takes one granularity", from, g, a.Name, pt.Granularity)
		}
		if from == "" || length(pt.Granularity) < length(g) {
			g, from = pt.Granularity, a.Name
		}
		if pt.Location != nil {
			if loc != nil && loc.String() != pt.Location.String() {
				return g, nil, fmt.Errorf("tranche: its assets are partitioned in zones %s and %s; a backfill takes one", loc, pt.Location)
			}
			loc = pt.Location
		}
	}
	if !g.IsValid() {
		return g, nil, errors.New("tranche: no asset is partitioned; a backfill needs partitioned assets")
	}
	if loc == nil {
		loc = time.UTC
	}
	return g, loc, nil
}

// ParseSpan reads the bounds from and to of a span as an operator types
// them, in loc, and returns the half-open span [start, end) they name:
//
//   - RFC 3339 with an offset is that instant (in loc);
//   - a time without an offset ("2026-03-29T02:30", "2026-03-29 06:00") is
//     read in loc, as [tranche.ParseBound] reads it (refused where loc's
//     clocks skip or repeat it);
//   - a date ("2026-03-29") means the start of that day in loc for from,
//     and its end for to, the start of the next day in loc: to's day is
//     included, however many hours it has.
//
// An empty bound is returned as the zero time. A bound of neither form is
// refused with [tranche.ParseBound]'s [*tranche.ParseError], and an end
// not after the start with an error naming both.
func ParseSpan(from, to string, loc *time.Location) (start, end time.Time, err error) {
	if loc == nil {
		loc = time.UTC
	}
	if strings.TrimSpace(from) != "" {
		if start, err = tranche.ParseBound(from, loc); err != nil {
			return start, end, err
		}
	}
	if to = strings.TrimSpace(to); to != "" {
		text := to
		if day, err := time.Parse(time.DateOnly, to); err == nil {
			text = day.AddDate(0, 0, 1).Format(time.DateOnly)
		}
		if end, err = tranche.ParseBound(text, loc); err != nil {
			if text != to {
				err = fmt.Errorf("tranche: to %s means through its end, the start of %s: %w", to, text, err)
			}
			return start, end, err
		}
	}
	if !start.IsZero() && !end.IsZero() && !start.Before(end) {
		return start, end, fmt.Errorf("tranche: from %s is not before to %s (its end, for a date); want a span of at least one instant",
			start.Format(time.RFC3339), end.Format(time.RFC3339))
	}
	return start, end, nil
}

// ParseWindow returns the window of dag's partitions between from and to
// as an operator types them, by one rule in the zone of dag's backfills
// (see [PartitioningOf]), or for a cron schedule with CRON_TZ, in that
// zone: a date means the start of that day for from and its end for to,
// so that to's partitions are included; a time without an offset is read
// in that zone. For time partitions, the bounds are read as [ParseSpan]
// reads them and must lie on partition boundaries ([tranche.WindowBetween]):
// "--from 2026-03-01 --to 2026-03-31" is March's days, or its hours. For a
// cron schedule they are the first and last fire, both included, as
// [tranche.SlotWindow] reads them, with now (an empty to) clamping the
// window to the slots that closed before now's minute.
func ParseWindow(dag *tranche.DAG, from, to string, now time.Time) (tranche.TimePartitionWindow, error) {
	g, loc, err := PartitioningOf(dag)
	if err != nil {
		return tranche.TimePartitionWindow{}, err
	}
	if strings.TrimSpace(from) == "" {
		return tranche.TimePartitionWindow{}, errors.New("tranche: no from: give the window's first bound")
	}
	if g.IsSchedule() {
		return tranche.SlotWindow(g, from, to, now.In(loc))
	}
	if strings.TrimSpace(to) == "" {
		return tranche.TimePartitionWindow{}, fmt.Errorf("tranche: from %s without to: give the window's last bound (a date: through its end)", strings.TrimSpace(from))
	}
	start, end, err := ParseSpan(from, to, loc)
	if err != nil {
		return tranche.TimePartitionWindow{}, err
	}
	return tranche.WindowBetween(g, start, end)
}

// ParseSlots returns the slots of dag's cron schedule that fire at the
// times fires gives, each read as [ParseSpan] reads a from (a time without
// an offset in the zone of dag's backfills), and placed in that zone, so
// that a slot named alone and a window holding it ([ParseWindow]) record
// one DAG identity. It refuses a DAG that is not partitioned by a cron
// schedule, and joins the refusals of every time that is not a fire.
func ParseSlots(dag *tranche.DAG, fires []string) ([]tranche.TimePartition, error) {
	g, loc, err := PartitioningOf(dag)
	if err != nil {
		return nil, err
	}
	if !g.IsSchedule() {
		return nil, fmt.Errorf("tranche: slots name the fire times of a cron schedule, and the DAG is partitioned by %v; give a window", g)
	}
	var ps []tranche.TimePartition
	var errs []error
	for _, s := range fires {
		t, err := tranche.ParseBound(s, loc)
		if err == nil {
			var p tranche.TimePartition
			if p, err = tranche.SlotAt(g, t.In(loc)); err == nil {
				ps = append(ps, p)
				continue
			}
		}
		errs = append(errs, fmt.Errorf("slot %s: %w", s, err))
	}
	return ps, errors.Join(errs...)
}
