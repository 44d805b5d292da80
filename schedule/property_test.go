package schedule_test

import (
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/schedule"
	"pgregory.net/rapid"
)

// TestPropertySessions runs a scheduler in sessions separated by
// downtimes of random lengths, for random granularities, zones and
// catch-up settings, and checks what holds whatever they are: every slot
// that closed after the first start and before the last stop ran once or
// was reported missed once, never both; slots ran oldest first; a slot
// that closed during a session ran at its close, live; a restart caught
// up at most its window's count, the newest of what it found missed. A
// start before any slot has run is a first run, which starts from now.
func TestPropertySessions(t *testing.T) {
	grans := []struct {
		name string
		g    func(t testing.TB) tranche.TimeGranularity
	}{
		{"hour", func(testing.TB) tranche.TimeGranularity { return tranche.Hour }},
		{"15m", func(testing.TB) tranche.TimeGranularity { return tranche.Every(15, tranche.Minute) }},
		{"day", func(testing.TB) tranche.TimeGranularity { return tranche.Day }},
		{"*/20 cron", func(t testing.TB) tranche.TimeGranularity { return mustCron(t, "*/20 * * * *") }},
		{"weekday 09:30 cron", func(t testing.TB) tranche.TimeGranularity { return mustCron(t, "30 9 * * 1-5") }},
	}
	zones := []string{"UTC", "America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu"}
	// Starts near transitions, so that sessions cross them.
	starts := []string{"2024-03-09T20:00:03Z", "2024-11-02T20:00:03Z", "2024-04-06T10:00:03Z", "2024-10-05T10:00:03Z", "2026-06-15T08:00:03Z"}
	rapid.Check(t, func(rt *rapid.T) {
		gran := rapid.SampledFrom(grans).Draw(rt, "granularity")
		zone := rapid.SampledFrom(zones).Draw(rt, "zone")
		base := rapid.SampledFrom(starts).Draw(rt, "start")
		maxCatchUp := rapid.IntRange(-1, 7).Draw(rt, "max catch-up")
		window := time.Duration(rapid.SampledFrom([]int{0, 0, 45, 180, 1500}).Draw(rt, "window (minutes)")) * time.Minute
		n := rapid.IntRange(1, 4).Draw(rt, "sessions")
		type session struct{ up, down time.Duration }
		sessions := make([]session, n)
		for i := range sessions {
			// Whole minutes and 7 seconds: never at a close.
			sessions[i].up = time.Duration(rapid.IntRange(1, 24*60).Draw(rt, fmt.Sprintf("up %d", i)))*time.Minute + 7*time.Second
			sessions[i].down = time.Duration(rapid.IntRange(0, 24*60).Draw(rt, fmt.Sprintf("down %d", i)))*time.Minute + 7*time.Second
		}

		type obs struct {
			g              tranche.TimeGranularity
			loc            *time.Location
			first, last    time.Time   // the first start, and the last stop
			starts, stops  []time.Time // of each session
			calls          []call
			missed         []string
			live           []string
			missedAtStarts [][]string
		}
		var o obs
		synctest.Test(t, func(t *testing.T) {
			o.g, o.loc = gran.g(t), mustLoad(t, zone)
			clock := offsetClock(mustTime(t, base).In(o.loc))
			w := newWork(t, o.g, o.loc, clock)
			l := memledger.New(clock)
			var ev events
			s := &schedule.Scheduler{DAG: w.dag, Ledger: l, MaxCatchUp: maxCatchUp, CatchUpWindow: window, Now: clock, OnEvent: ev.hook}
			o.first = clock()
			for _, ss := range sessions {
				o.starts = append(o.starts, clock())
				before := len(ev.of(schedule.KindMissed))
				runFor(t, s, ss.up)
				o.missedAtStarts = append(o.missedAtStarts, ev.of(schedule.KindMissed)[before:])
				o.stops = append(o.stops, clock())
				time.Sleep(ss.down)
			}
			o.last = o.stops[len(o.stops)-1]
			o.calls = w.callList()
			o.missed = ev.of(schedule.KindMissed)
			for _, e := range ev.list() {
				if e.Kind != schedule.KindSucceeded {
					continue
				}
				if schedule.TriggerOf(e) == ledger.TriggerLive {
					o.live = append(o.live, e.Target)
				}
			}
		})

		// Every slot closing in (first, last] is accounted for once.
		seen := map[string]string{}
		for _, c := range o.calls {
			if prev, ok := seen[c.key]; ok {
				rt.Fatalf("slot %s %s, and ran again", c.key, prev)
			}
			seen[c.key] = "ran"
		}
		for _, k := range o.missed {
			if prev, ok := seen[k]; ok {
				rt.Fatalf("slot %s %s, and was reported missed", k, prev)
			}
			seen[k] = "missed"
		}
		// Until a slot has run, the ledger holds no run of the DAG, and a
		// start is a first run, from now: the span starts with the first
		// session in which a slot closed.
		from := o.last
		for i := range o.starts {
			if p := tranche.PartitionOf(o.g, o.stops[i]); !p.Start.After(o.starts[i]) {
				continue // nothing closed in session i
			}
			from = o.starts[i]
			break
		}
		closed := 0
		for p := tranche.PartitionOf(o.g, o.first); !p.End.After(o.last); p = p.Next() {
			if !p.End.After(from) {
				continue
			}
			closed++
			if seen[p.Key()] == "" {
				rt.Fatalf("slot %s closed at %v, within [%v, %v], and neither ran nor was reported missed", p.Key(), p.End, o.first, o.last)
			}
		}
		if len(seen) != closed {
			rt.Fatalf("%d slots accounted for, %d closed in the span", len(seen), closed)
		}
		// Oldest first.
		if !slices.IsSortedFunc(o.calls, func(a, b call) int {
			pa, _ := tranche.ParsePartitionKey(o.g, a.key, o.loc)
			pb, _ := tranche.ParsePartitionKey(o.g, b.key, o.loc)
			return pa.Compare(pb)
		}) {
			rt.Fatalf("runs out of order: %v", o.calls)
		}
		// A slot that closed during a session ran at its close, live; one
		// that closed during a downtime ran at the next start, caught up,
		// or was missed.
		live := map[string]bool{}
		for _, k := range o.live {
			live[k] = true
		}
		for _, c := range o.calls {
			p, err := tranche.ParsePartitionKey(o.g, c.key, o.loc)
			if err != nil {
				rt.Fatal(err)
			}
			during := false
			for i := range o.starts {
				if p.End.After(o.starts[i]) && !p.End.After(o.stops[i]) {
					during = true
				}
			}
			switch {
			case during && (!c.at.Equal(p.End) || !live[c.key]):
				rt.Fatalf("slot %s closed during a session, ran at %v (live %v)", c.key, c.at, live[c.key])
			case !during && (live[c.key] || !slices.ContainsFunc(o.starts, c.at.Equal)):
				rt.Fatalf("slot %s closed during a downtime, ran at %v (live %v), not at a start", c.key, c.at, live[c.key])
			}
		}
		// Each start caught up at most its count, and only slots newer
		// than those it reported missed.
		limit := maxCatchUp
		if limit == 0 {
			limit = schedule.DefaultMaxCatchUp
		}
		for i, at := range o.starts {
			var caught []tranche.TimePartition
			for _, c := range o.calls {
				if c.at.Equal(at) && !live[c.key] {
					p, _ := tranche.ParsePartitionKey(o.g, c.key, o.loc)
					caught = append(caught, p)
				}
			}
			if len(caught) > max(limit, 0) {
				rt.Fatalf("start %d caught up %d slots, more than %d", i, len(caught), limit)
			}
			for _, k := range o.missedAtStarts[i] {
				p, _ := tranche.ParsePartitionKey(o.g, k, o.loc)
				for _, c := range caught {
					if !p.Start.Before(c.Start) {
						rt.Fatalf("start %d reported %s missed and caught up the older %s", i, k, c.Key())
					}
				}
			}
		}
	})
}
