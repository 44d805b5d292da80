package tranche_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tranche-dev/tranche"
)

// oracleZones are the zones whose transition days TestMappingsAgainstZoneinfo
// checks: 30-minute DST (Lord Howe), +12:45 (Chatham), a skipped date
// (Apia), midnight transitions (São Paulo, Havana, Santiago), transitions
// off the hour (St. John's until 2011), negative DST (Dublin), Ramadan
// breaks (Casablanca), and Tehran's +03:30.
var oracleZones = []string{
	"America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Pacific/Apia",
	"America/Sao_Paulo", "America/St_Johns", "Pacific/Chatham", "America/Santiago",
	"Asia/Tehran", "America/Havana", "Africa/Casablanca", "Europe/Dublin",
}

// TestMappingsAgainstZoneinfo checks the mapped sets of every transition
// day (and the day after) of 12 zones from 1990 to 2035 against
// testdata/maporacle.py, which computes them from Python's zoneinfo and
// the partition rules alone: the day's bounds, its hours (what a daily
// asset reads of an hourly one), the 24 hours ending with its last (a
// trailing window), the days of its ISO week and of its month (what a
// weekly and a monthly asset read of a daily one), and the day holding
// each of its hours (an hourly asset's Open mapping to a daily one).
func TestMappingsAgainstZoneinfo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Python's zoneinfo over 46 years of 12 zones")
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	args := append([]string{"testdata/maporacle.py", "1990-01-01", "2035-12-31"}, oracleZones...)
	out, err := exec.Command(python, args...).Output()
	if err != nil {
		t.Fatalf("maporacle.py: %v", err)
	}
	var cases int
	days := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c struct {
			Zone, Day         string
			Start, End        int64
			Hours, Trailing24 []string
			Week, Month       []string
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		cases++
		days[c.Zone]++
		loc := mustZone(t, c.Zone)
		d := mustKey(t, tranche.Day, c.Day, loc)
		if d.Start.Unix() != c.Start || d.End.Unix() != c.End {
			t.Errorf("%s %s: day [%v, %v), zoneinfo [%v, %v)", c.Zone, c.Day, d.Start, d.End, time.Unix(c.Start, 0).In(loc), time.Unix(c.End, 0).In(loc))
			continue
		}
		check := func(what string, want []string, got []tranche.TimePartition) {
			t.Helper()
			keys := make([]string, len(got))
			for i, p := range got {
				keys[i] = p.Key()
			}
			if diff := cmp.Diff(want, keys); diff != "" {
				t.Errorf("%s %s: %s (-zoneinfo +tranche):\n%s", c.Zone, c.Day, what, diff)
			}
		}
		hours := tranche.MappedPartitions(tranche.Mapping{}, tranche.Hour, d)
		check("the hours of the day", c.Hours, hours)
		check("the 24 hours ending with the day's last", c.Trailing24, tranche.MappedPartitions(tranche.Mapping{Lookback: 24}, tranche.Hour, d))
		check("the days of its ISO week", c.Week, tranche.MappedPartitions(tranche.Mapping{}, tranche.Day, tranche.PartitionOf(tranche.Week, d.Start)))
		check("the days of its month", c.Month, tranche.MappedPartitions(tranche.Mapping{}, tranche.Day, tranche.PartitionOf(tranche.Month, d.Start)))
		for _, h := range hours {
			if got := tranche.MappedPartitions(tranche.Mapping{Open: true}, tranche.Day, h); len(got) != 1 || !got[0].Equal(d) {
				t.Errorf("%s: hour %s maps to %v, want day %s", c.Zone, h.Key(), got, c.Day)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, z := range oracleZones {
		if days[z] == 0 {
			t.Errorf("zoneinfo gave no transition day of %s", z)
		}
	}
	zones := slices.Sorted(func(yield func(string) bool) {
		for z := range days {
			if !yield(z) {
				return
			}
		}
	})
	t.Logf("%d transition days checked in %d zones", cases, len(zones))
}
