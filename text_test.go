package tranche_test

import (
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/tranche-dev/tranche"
)

// The text forms of values that travel: partitions, windows and
// granularities, in JSON and in configs.

// drawTextZone draws a zone of the property tests, or a fixed offset
// without a name, as time.Parse returns for a time with an offset.
func drawTextZone(t *rapid.T) *time.Location {
	if rapid.Bool().Draw(t, "fixed") {
		quarters := rapid.IntRange(-12*4, 14*4).Draw(t, "offset quarter hours")
		return time.FixedZone("", quarters*15*60)
	}
	return drawZone(t)
}

func TestPropertyPartitionText(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		loc := drawTextZone(t)
		g := drawGranularity(t)
		p := tranche.PartitionOf(g, drawInstant(t, loc, "at"))
		text, err := p.MarshalText()
		if err != nil {
			t.Fatalf("MarshalText(%v in %v): %v", p, loc, err)
		}
		var back tranche.TimePartition
		if err := back.UnmarshalText(text); err != nil {
			t.Fatalf("UnmarshalText(%q): %v", text, err)
		}
		if !back.Equal(p) || back.Key() != p.Key() || back.Granularity != g {
			t.Fatalf("UnmarshalText(%q) = %v in %v, want %v in %v", text, back, back.Start.Location(), p, loc)
		}
		if again, err := back.MarshalText(); err != nil || string(again) != string(text) {
			t.Fatalf("MarshalText(UnmarshalText(%q)) = %q, %v", text, again, err)
		}
		// The text holds the granularity, the key and the zone.
		if want := g.String() + " " + p.Key() + " "; !strings.HasPrefix(string(text), want) {
			t.Fatalf("MarshalText(%v) = %q, want it to begin %q", p, text, want)
		}
	})
}

// travel is a struct as a user stores one in JSON.
type travel struct {
	Granularity tranche.TimeGranularity
	Partition   tranche.TimePartition
	Window      tranche.TimePartitionWindow
}

func TestPropertyJSONRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w, _, g := drawWindow(t)
		v := travel{Granularity: g, Partition: w.Newest(), Window: w}
		if rapid.Bool().Draw(t, "zero") {
			v = travel{}
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("json.Marshal(%v): %v", v, err)
		}
		var back travel
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("json.Unmarshal(%s): %v", b, err)
		}
		if back.Granularity != v.Granularity || !back.Partition.Equal(v.Partition) || !back.Window.Equal(v.Window) || back.Window.Len() != v.Window.Len() {
			t.Fatalf("json.Unmarshal(%s) = %+v, want %+v", b, back, v)
		}
	})
}

// TestTextFormsJSON pins the JSON of each value, zero values included:
// the zero granularity, partition and window are empty strings, and
// empty strings read back as zero values.
func TestTextFormsJSON(t *testing.T) {
	ny := loadLocation(t, "America/New_York")
	hour := tranche.PartitionOf(tranche.Hour, time.Date(2024, 11, 3, 1, 30, 0, 0, ny).Add(time.Hour)) // the second 01:00
	week, err := tranche.NewTimePartitionWindow(tranche.Week, time.Date(2026, 12, 28, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 4, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	slot, err := tranche.SlotAt(mustCron(t, "0 2 * * 1-5"), time.Date(2026, 1, 5, 2, 0, 0, 0, ny))
	if err != nil {
		t.Fatal(err)
	}
	fixed := tranche.PartitionOf(tranche.Day, time.Date(2026, 1, 1, 12, 0, 0, 0, time.FixedZone("", 3600)))
	tests := []struct {
		name string
		v    travel
		want string
	}{
		{"zero values", travel{}, `{"Granularity":"","Partition":"","Window":""}`},
		{"an hour of a fall-back night", travel{tranche.Hour, hour, week},
			`{"Granularity":"hour","Partition":"hour 2024-11-03T01:00-05:00 America/New_York","Window":"week 2026-W53..2027-W01 UTC"}`},
		{"a cron slot", travel{Partition: slot},
			`{"Granularity":"","Partition":"cron(0 2 * * 1-5) 2026-01-05T02:00:00-05:00 America/New_York","Window":""}`},
		{"a fixed offset", travel{Partition: fixed},
			`{"Granularity":"","Partition":"day 2026-01-01 +01:00","Window":""}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.v)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(b)); diff != "" {
				t.Errorf("json.Marshal (-want +got):\n%s", diff)
			}
			var back travel
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if back.Granularity != tt.v.Granularity || !back.Partition.Equal(tt.v.Partition) || !back.Window.Equal(tt.v.Window) {
				t.Errorf("json.Unmarshal(%s) = %+v, want %+v", b, back, tt.v)
			}
			if zero := (tranche.TimePartition{}); (tt.v.Partition == zero) != (back.Partition == zero) {
				t.Errorf("json.Unmarshal(%s): partition zero %v, want %v", b, back.Partition == zero, tt.v.Partition == zero)
			}
		})
	}
}

// TestPartitionTextErrors: what UnmarshalText and MarshalText refuse.
func TestPartitionTextErrors(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"day 2024-03-10", `partition "day 2024-03-10": want "GRANULARITY KEY ZONE"`},
		{"fortnight 2024-03-10 UTC", `granularity "fortnight": unknown unit`},
		{"day 2024-03-10 Mars/Olympus", `zone "Mars/Olympus"`},
		{"day 2024-03-10 Local", `zone "Local": it names the host's zone`},
		{"month 2024-13 UTC", `partition key "2024-13": not a month key: month 13 is out of range (01 to 12)`},
		{"hour 2024-11-03T01:30-04:00 America/New_York", "not the start of a hour partition"},
	} {
		var p tranche.TimePartition
		err := p.UnmarshalText([]byte(tt.in))
		pe, ok := errors.AsType[*tranche.ParseError](err)
		if !ok || pe.Type != "partition" || pe.Text != tt.in || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("UnmarshalText(%q) = %v; want a ParseError containing %q", tt.in, err, tt.want)
		}
	}
	start := time.Date(2024, 3, 10, 6, 0, 0, 0, time.UTC)
	for _, p := range []tranche.TimePartition{
		{Start: start, End: start.Add(time.Hour), Granularity: tranche.Day},      // not a day
		{Start: start, End: start.Add(time.Hour)},                                // no granularity
		{Start: start, End: start.Add(2 * time.Hour), Granularity: tranche.Hour}, // two hours
	} {
		if b, err := p.MarshalText(); err == nil {
			t.Errorf("MarshalText(%v) = %q, want an error", p, b)
		}
	}

	// A zone with daylight saving time named "Local", as time.Local is on
	// a host with such a zone and without TZ: no other host would read the
	// same calendar from that name.
	data, err := os.ReadFile("/usr/share/zoneinfo/Europe/Berlin")
	if err != nil {
		t.Skipf("no zone file to build a DST zone named Local: %v", err)
	}
	local, err := time.LoadLocationFromTZData("Local", data)
	if err != nil {
		t.Fatal(err)
	}
	p := tranche.PartitionOf(tranche.Day, time.Date(2026, 7, 1, 0, 0, 0, 0, local))
	if b, err := p.MarshalText(); err == nil || !strings.Contains(err.Error(), `its location "Local" is not a zone database name or a fixed offset`) {
		t.Errorf("MarshalText in a DST zone named Local = %q, %v; want an error", b, err)
	}
	w, err := tranche.NewTimePartitionWindow(tranche.Day, p.Start, p.Start)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := w.MarshalText(); err == nil {
		t.Errorf("MarshalText of a window in a DST zone named Local = %q, want an error", b)
	}
}

// TestParseErrorsTyped: every parser's refusal is a *ParseError naming
// the text and saying what was wrong.
func TestParseErrorsTyped(t *testing.T) {
	ny := loadLocation(t, "America/New_York")
	parse := map[string]func(string) error{
		"bound":         func(s string) error { _, err := tranche.ParseBound(s, ny); return err },
		"partition key": func(s string) error { _, err := tranche.ParsePartitionKey(tranche.Month, s, ny); return err },
		"granularity":   func(s string) error { _, err := tranche.ParseGranularity(s); return err },
		"cron":          func(s string) error { _, err := tranche.ParseCron(s); return err },
		"window":        func(s string) error { _, err := tranche.ParseTimePartitionWindow(s); return err },
	}
	tests := []struct {
		kind, text, reason string
	}{
		{"bound", "yesterday", "relative words such as yesterday are not times: use Lookback for a window relative to now, or write RFC 3339 with an offset, as in 2026-01-01T00:00:00Z, or a date or time with a zone"},
		{"bound", "2026-13-01", "month 13 is out of range (01 to 12)"},
		{"partition key", "2024-13", "not a month key: month 13 is out of range (01 to 12); want the form 2006-01"},
		{"partition key", "2024-03-01", "not a month key; want the form 2006-01"},
		{"granularity", "7m", "every 7 minutes: 7 does not divide the 60 minutes of an hour; use one of 1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60"},
		{"granularity", "1.5h", "the count must be a whole number; accepted: minute, hour, day, week, month, quarter, year, a count and a unit (15m, 6h, 1d, 2w, 1mo, 1q, 1y), or a cron schedule: cron(0 2 * * 1-5)"},
		{"cron", "0 25 * * *", `hour field "25": 25 is out of range 0-23`},
		{"cron", "0 0 30 2 *", `"0 0 30 2 *" never fires: February has no 30th`},
		{"window", "day 2024-01-01 UTC", `want "GRANULARITY OLDEST..NEWEST ZONE", as in "day 2024-01-01..2024-01-31 America/New_York"`},
	}
	for _, tt := range tests {
		err := parse[tt.kind](tt.text)
		pe, ok := errors.AsType[*tranche.ParseError](err)
		if !ok {
			t.Errorf("%s %q: error %v is not a *ParseError", tt.kind, tt.text, err)
			continue
		}
		if diff := cmp.Diff(tranche.ParseError{Type: tt.kind, Text: tt.text, Reason: tt.reason}, *pe); diff != "" {
			t.Errorf("%s %q (-want +got):\n%s", tt.kind, tt.text, diff)
		}
	}
	// A cron schedule inside a granularity: both errors are found.
	_, err := tranche.ParseGranularity("cron(0 25 * * *)")
	outer, _ := errors.AsType[*tranche.ParseError](err)
	var inner *tranche.ParseError
	if outer == nil || outer.Type != "granularity" || !errors.As(outer.Err, &inner) || inner.Type != "cron" || inner.Text != "0 25 * * *" {
		t.Errorf("ParseGranularity(cron(0 25 * * *)) = %v; want the granularity's ParseError wrapping the cron's", err)
	}
}

// TestPolicyText checks that FailurePolicy, which both a runner and a
// backfill are configured by, takes text as slog.Level does: through
// flag.TextVar and JSON, each accepted form round-tripping, and every
// other form refused with an error.
func TestPolicyText(t *testing.T) {
	for _, s := range []string{"stop", "continue"} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		var v tranche.FailurePolicy
		fs.TextVar(&v, "v", tranche.FailStop, "")
		if err := fs.Parse([]string{"-v", s}); err != nil {
			t.Fatalf("flag -v %s: %v", s, err)
		}
		if got, err := v.MarshalText(); err != nil || string(got) != s {
			t.Errorf("flag -v %s: MarshalText = %q, %v; want %q", s, got, err, s)
		}
		data, err := json.Marshal(v)
		if err != nil || string(data) != `"`+s+`"` {
			t.Errorf("json.Marshal(%s) = %s, %v", s, data, err)
		}
		var w tranche.FailurePolicy
		if err := json.Unmarshal(data, &w); err != nil {
			t.Errorf("json.Unmarshal(%s): %v", data, err)
		} else if got, _ := w.MarshalText(); string(got) != s {
			t.Errorf("json round trip of %s gives %s", s, got)
		}
	}
	const bad = "halt"
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.TextVar(new(tranche.FailurePolicy), "v", tranche.FailStop, "")
	if err := fs.Parse([]string{"-v", bad}); err == nil {
		t.Errorf("flag -v %q accepted; want an error", bad)
	}
	if err := json.Unmarshal([]byte(`"`+bad+`"`), new(tranche.FailurePolicy)); err == nil {
		t.Errorf("json.Unmarshal(%q) accepted; want an error", bad)
	}
	if _, err := tranche.FailurePolicy(bad).MarshalText(); err == nil {
		t.Errorf("FailurePolicy(%q).MarshalText() succeeded; want an error", bad)
	}
	p := tranche.FailContinue
	if err := p.UnmarshalText(nil); err != nil || p != tranche.FailStop {
		t.Errorf(`UnmarshalText("") = %q, %v; want %q`, p, err, tranche.FailStop)
	}
}
