package tranche_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/tranchetest"
)

// hostZones are the TZ values the zone tests run children under: no TZ
// at all (the host's /etc/localtime), UTC, and zones with daylight saving
// time, half-hour and 45-minute offsets.
var hostZones = []string{"unset", "UTC", "Europe/Berlin", "Asia/Kathmandu", "America/St_Johns"}

// runUnderTZ re-executes the test binary under TZ=zone ("unset" leaves TZ
// out of the environment), running only the tests that match run, with
// the extra environment variables env. It returns the output and fails the
// test if the child fails.
func runUnderTZ(t *testing.T, zone, run string, env ...string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), exe, "-test.run="+run, "-test.count=1")
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "TZ=") })
	if zone != "unset" {
		cmd.Env = append(cmd.Env, "TZ="+zone)
	}
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("under TZ=%s: %v\n%s", zone, err, out)
	}
	return string(out)
}

// zoneNames is what names the backfill of a week between bounds written
// with one offset.
type zoneNames struct {
	Location     string // the bounds' location
	Window       string // its text form (String)
	Marshaled    string // MarshalText
	Roundtrip    bool   // UnmarshalText(MarshalText) is the same window
	DAG          string // backfill.DAGIdentity
	Backfill     string // backfill.ID
	PlanDAG      string // the DAG identity of Backfill.Plan
	PlanBackfill string // the backfill id of Backfill.Plan
	Hours        int    // hourly partitions over Berlin's spring-forward day
	HoursText    string // that hourly window's text form
	Partition    string // TimePartition's text form of the first day
}

// zoneBounds are the bounds the children parse, by the offset they are
// written with.
var zoneBounds = map[string][2]string{
	"Z":      {"2026-03-23T00:00:00Z", "2026-03-30T00:00:00Z"},
	"+00:00": {"2026-03-23T00:00:00+00:00", "2026-03-30T00:00:00+00:00"},
	"+01:00": {"2026-03-23T00:00:00+01:00", "2026-03-30T00:00:00+01:00"},
	"-03:30": {"2026-03-23T00:00:00-03:30", "2026-03-30T00:00:00-03:30"},
}

// namesOf computes zoneNames in this process, under its TZ.
func namesOf(t *testing.T) map[string]zoneNames {
	dag := tranchetest.NewDAG(t, daily(tranchetest.Noop("loads")))
	out := map[string]zoneNames{}
	for offset, b := range zoneBounds {
		from, err := tranche.ParseBound(b[0], nil)
		if err != nil {
			t.Fatal(err)
		}
		to, err := tranche.ParseBound(b[1], nil)
		if err != nil {
			t.Fatal(err)
		}
		w, err := tranche.WindowBetween(tranche.Day, from, to)
		if err != nil {
			t.Fatal(err)
		}
		text, err := w.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back tranche.TimePartitionWindow
		if err := back.UnmarshalText(text); err != nil {
			t.Fatal(err)
		}
		// 2026-03-29 is Berlin's spring-forward day: a window that took
		// the host's calendar would hold 23 hours.
		day := from.AddDate(0, 0, 6)
		hours, err := tranche.NewTimePartitionWindow(tranche.Hour, day, day.AddDate(0, 0, 1).Add(-time.Second))
		if err != nil {
			t.Fatal(err)
		}
		p, err := tranche.PartitionOf(tranche.Day, from).MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		dagID := backfill.DAGIdentity(dag, tranche.Day, w.Location())
		plan, err := (&backfill.Backfill{DAG: dag, Window: w, Ledger: memledger.New(nil)}).Plan(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		out[offset] = zoneNames{
			Location: w.Location().String(), Window: w.String(), Marshaled: string(text), Roundtrip: back.Equal(w),
			DAG: dagID, Backfill: backfill.ID(dagID, w, 1), PlanDAG: plan.DAG, PlanBackfill: plan.Backfill,
			Hours: hours.Len(), HoursText: hours.String(), Partition: string(p),
		}
	}
	return out
}

// daily partitions a by day, in the window's location.
func daily(a tranche.Asset) tranche.Asset {
	a.Partitioning = tranche.Partitioning{Granularity: tranche.Day}
	return a
}

// TestIdentityUnderEveryTZ runs the same program under several TZ values,
// in child processes, and requires that bounds written with an offset
// name the same window, DAG and backfill under every one: the host's
// zone never enters an identity. "Z" and "+00:00" are the same bound.
func TestIdentityUnderEveryTZ(t *testing.T) {
	if path := os.Getenv("TRANCHE_ZONE_NAMES"); path != "" {
		b, err := json.Marshal(namesOf(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if testing.Short() {
		t.Skip("starts a child process per zone")
	}
	want := map[string]zoneNames{
		"Z": {
			Location: "UTC", Window: "day 2026-03-23..2026-03-29 UTC", Marshaled: "day 2026-03-23..2026-03-29 UTC", Roundtrip: true,
			Hours: 24, HoursText: "hour 2026-03-29T00:00Z..2026-03-29T23:00Z UTC", Partition: "day 2026-03-23 UTC",
		},
		"+01:00": {
			Location: "+01:00", Window: "day 2026-03-23..2026-03-29 +01:00", Marshaled: "day 2026-03-23..2026-03-29 +01:00", Roundtrip: true,
			Hours: 24, HoursText: "hour 2026-03-29T00:00+01:00..2026-03-29T23:00+01:00 +01:00", Partition: "day 2026-03-23 +01:00",
		},
		"-03:30": {
			Location: "-03:30", Window: "day 2026-03-23..2026-03-29 -03:30", Marshaled: "day 2026-03-23..2026-03-29 -03:30", Roundtrip: true,
			Hours: 24, HoursText: "hour 2026-03-29T00:00-03:30..2026-03-29T23:00-03:30 -03:30", Partition: "day 2026-03-23 -03:30",
		},
	}
	// The identities of UTC windows are the pinned ones; those of fixed
	// offsets are pinned here, since ledgers key their history by them.
	ids := map[string][2]string{ // DAG identity, backfill id
		"Z":      {"e317d3136121635b", "8ad1003873aa"},
		"+01:00": {"f61fe245bbd81fd4", "9bb84b9b4aaa"},
		"-03:30": {"8fdf9bcd944689f4", "2843289592dd"},
	}
	dir := t.TempDir()
	results := map[string]map[string]zoneNames{}
	for _, zone := range hostZones {
		path := filepath.Join(dir, strings.ReplaceAll(zone, "/", "_")+".json")
		runUnderTZ(t, zone, "^TestIdentityUnderEveryTZ$", "TRANCHE_ZONE_NAMES="+path)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]zoneNames
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		results[zone] = got
	}
	first := results[hostZones[0]]
	for _, zone := range hostZones {
		got := results[zone]
		if diff := cmp.Diff(got["Z"], got["+00:00"]); diff != "" {
			t.Errorf("under TZ=%s, bounds written with +00:00 name another backfill than with Z (-Z +00:00):\n%s", zone, diff)
		}
		if diff := cmp.Diff(first, got); diff != "" {
			t.Errorf("under TZ=%s the names differ from those under TZ=%s (-%[2]s +%[1]s):\n%s", zone, hostZones[0], diff)
		}
		for offset, w := range want {
			w.DAG, w.PlanDAG = ids[offset][0], ids[offset][0]
			w.Backfill, w.PlanBackfill = ids[offset][1], ids[offset][1]
			if diff := cmp.Diff(w, got[offset]); diff != "" {
				t.Errorf("under TZ=%s, bounds written with %s (-want +got):\n%s", zone, offset, diff)
			}
		}
	}
}

// TestGoldenUnderEveryTZ runs the golden tests of the slog hook and of
// the events' JSON form under each host zone: golden files hold UTC,
// whatever the zone of the machine that runs the suite.
func TestGoldenUnderEveryTZ(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process per zone")
	}
	if os.Getenv("TRANCHE_ZONE_CHILD") != "" {
		t.Skip("already a child")
	}
	for _, zone := range hostZones {
		out := runUnderTZ(t, zone, "^(TestSlogHookGolden|TestEventJSONGolden)$", "TRANCHE_ZONE_CHILD=1")
		if !strings.Contains(out, "PASS") {
			t.Errorf("under TZ=%s the golden tests did not run:\n%s", zone, out)
		}
	}
}
