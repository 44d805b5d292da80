package tranche_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tranche-dev/tranche"
)

// granularityEqual lets cmp compare granularities, which are comparable
// values with unexported fields.
var granularityEqual = cmp.Comparer(func(a, b tranche.TimeGranularity) bool { return a == b })

func TestParseGranularity(t *testing.T) {
	tests := []struct {
		in         string
		want       tranche.TimeGranularity
		wantString string
	}{
		{"minute", tranche.Minute, "minute"},
		{"hour", tranche.Hour, "hour"},
		{"day", tranche.Day, "day"},
		{"week", tranche.Week, "week"},
		{"month", tranche.Month, "month"},
		{"quarter", tranche.Quarter, "quarter"},
		{"year", tranche.Year, "year"},
		{"1m", tranche.Minute, "minute"},
		{"1h", tranche.Hour, "hour"},
		{"1d", tranche.Day, "day"},
		{"1w", tranche.Week, "week"},
		{"1mo", tranche.Month, "month"},
		{"1q", tranche.Quarter, "quarter"},
		{"1y", tranche.Year, "year"},
		{"Day", tranche.Day, "day"},
		{" DAILY ", tranche.Day, "day"},
		{"hourly", tranche.Hour, "hour"},
		{"weekly", tranche.Week, "week"},
		{"monthly", tranche.Month, "month"},
		{"quarterly", tranche.Quarter, "quarter"},
		{"annual", tranche.Year, "year"},
		{"15m", tranche.Every(15, tranche.Minute), "15m"},
		{"15 minutes", tranche.Every(15, tranche.Minute), "15m"},
		{"15min", tranche.Every(15, tranche.Minute), "15m"},
		{"5m", tranche.Every(5, tranche.Minute), "5m"},
		{"30m", tranche.Every(30, tranche.Minute), "30m"},
		{"6h", tranche.Every(6, tranche.Hour), "6h"},
		{"6 hours", tranche.Every(6, tranche.Hour), "6h"},
		{"24h", tranche.Every(24, tranche.Hour), "24h"},
		{"3d", tranche.Every(3, tranche.Day), "3d"},
		{"400d", tranche.Every(400, tranche.Day), "400d"},
		{"2w", tranche.Every(2, tranche.Week), "2w"},
		{"3mo", tranche.Every(3, tranche.Month), "3mo"},
		{"12mo", tranche.Every(12, tranche.Month), "12mo"},
		{"2q", tranche.Every(2, tranche.Quarter), "2q"},
		{"10y", tranche.Every(10, tranche.Year), "10y"},
		{"60m", tranche.Hour, "hour"}, // the same partitions and keys as an hour
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := tranche.ParseGranularity(tt.in)
			if err != nil {
				t.Fatalf("ParseGranularity(%q): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got, granularityEqual); diff != "" {
				t.Errorf("ParseGranularity(%q) mismatch (-want +got):\n%s", tt.in, diff)
			}
			if diff := cmp.Diff(tt.wantString, got.String()); diff != "" {
				t.Errorf("ParseGranularity(%q).String() mismatch (-want +got):\n%s", tt.in, diff)
			}
			back, err := tranche.ParseGranularity(got.String())
			if err != nil || back != got {
				t.Errorf("ParseGranularity(%q) = %v, %v; want %v (String round trip)", got.String(), back, err, got)
			}
		})
	}
}

func TestParseGranularityErrors(t *testing.T) {
	// An unknown granularity lists the accepted forms: the unit names and
	// a count with a unit.
	accepted := func(value string) []string {
		return []string{value, "accepted: minute, hour, day, week, month, quarter, year", "15m", "6h", "1d", "2w", "1mo", "1q", "1y"}
	}
	tests := []struct {
		in       string
		wantErrs []string // each must appear in the error
	}{
		{"", accepted(`""`)},
		{"fortnight", accepted(`"fortnight"`)},
		{"1.5h", accepted(`"1.5h"`)},
		{"-1d", accepted(`"-1d"`)},
		{"d1", accepted(`"d1"`)},
		{"15", accepted(`"15"`)},
		{"15 s", accepted(`"15 s"`)},
		{"0d", []string{`"0d"`, "between 1 and 1000000"}},
		{"0m", []string{`"0m"`, "between 1 and 1000000"}},
		{"99999999999999999999d", []string{`"99999999999999999999d"`, "between 1 and 1000000"}},
		{"7m", []string{`"7m"`, "7 does not divide the 60 minutes of an hour", "use one of 1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60"}},
		{"45m", []string{`"45m"`, "use one of 1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60"}},
		{"5h", []string{`"5h"`, "5 does not divide the 24 hours of a day", "use one of 1, 2, 3, 4, 6, 8, 12, 24"}},
		{"48h", []string{`"48h"`, "use one of 1, 2, 3, 4, 6, 8, 12, 24"}},
		{"5mo", []string{`"5mo"`, "5 does not divide the 12 months of a year", "use one of 1, 2, 3, 4, 6, 12"}},
		{"3q", []string{`"3q"`, "3 does not divide the 4 quarters of a year", "use one of 1, 2, 4"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			g, err := tranche.ParseGranularity(tt.in)
			if err == nil {
				t.Fatalf("ParseGranularity(%q) = %v, want an error", tt.in, g)
			}
			for _, want := range tt.wantErrs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("ParseGranularity(%q) error %q does not contain %q", tt.in, err, want)
				}
			}
			if g.IsValid() {
				t.Errorf("ParseGranularity(%q) returned the valid %v with its error", tt.in, g)
			}
		})
	}
}

func TestGranularityOneCanonicalForm(t *testing.T) {
	day, err := tranche.ParseGranularity("day")
	if err != nil {
		t.Fatal(err)
	}
	oneD, err := tranche.ParseGranularity("1d")
	if err != nil {
		t.Fatal(err)
	}
	if day != oneD || day != tranche.Day || tranche.Every(1, tranche.Day) != tranche.Day {
		t.Errorf(`"day" = %#v, "1d" = %#v, Every(1, Day) = %#v: want one value`, day, oneD, tranche.Every(1, tranche.Day))
	}
	seen := map[tranche.TimeGranularity]string{}
	for _, s := range []string{"day", "1d", "daily", "1 day", "days"} {
		g, err := tranche.ParseGranularity(s)
		if err != nil {
			t.Fatal(err)
		}
		seen[g] = s
	}
	if len(seen) != 1 {
		t.Errorf("the spellings of a day parse to %d map keys, want 1: %v", len(seen), seen)
	}
}

func TestGranularityJSON(t *testing.T) {
	type config struct {
		Every tranche.TimeGranularity `json:"every"`
	}
	tests := []struct {
		g    tranche.TimeGranularity
		json string
	}{
		{tranche.Day, `{"every":"day"}`},
		{tranche.Every(15, tranche.Minute), `{"every":"15m"}`},
		{tranche.Every(2, tranche.Week), `{"every":"2w"}`},
		{tranche.Every(3, tranche.Month), `{"every":"3mo"}`},
	}
	for _, tt := range tests {
		t.Run(tt.g.String(), func(t *testing.T) {
			b, err := json.Marshal(config{tt.g})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.json, string(b)); diff != "" {
				t.Errorf("json.Marshal mismatch (-want +got):\n%s", diff)
			}
			var got config
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.g, got.Every, granularityEqual); diff != "" {
				t.Errorf("json.Unmarshal(%s) mismatch (-want +got):\n%s", b, diff)
			}
		})
	}
	t.Run("short form", func(t *testing.T) {
		var got config
		if err := json.Unmarshal([]byte(`{"every":"1d"}`), &got); err != nil {
			t.Fatal(err)
		}
		if got.Every != tranche.Day {
			t.Errorf(`json.Unmarshal("1d") = %v, want day`, got.Every)
		}
	})
	t.Run("bad", func(t *testing.T) {
		var got config
		err := json.Unmarshal([]byte(`{"every":"7m"}`), &got)
		if err == nil || !strings.Contains(err.Error(), "use one of 1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60") {
			t.Errorf(`json.Unmarshal("7m") error = %v, want one listing the divisors of 60`, err)
		}
	})
	t.Run("zero", func(t *testing.T) {
		// The zero value is empty text, both ways.
		b, err := json.Marshal(config{})
		if err != nil || string(b) != `{"every":""}` {
			t.Fatalf(`json.Marshal of the zero granularity = %s, %v; want {"every":""}`, b, err)
		}
		got := config{Every: tranche.Day}
		if err := json.Unmarshal(b, &got); err != nil || got.Every.IsValid() {
			t.Errorf("json.Unmarshal(%s) = %v, %v; want the zero granularity", b, got.Every, err)
		}
	})
}

func TestGranularityFlag(t *testing.T) {
	tests := []struct {
		args    []string
		want    tranche.TimeGranularity
		wantErr string
	}{
		{nil, tranche.Day, ""},
		{[]string{"-every", "6h"}, tranche.Every(6, tranche.Hour), ""},
		{[]string{"-every=week"}, tranche.Week, ""},
		{[]string{"-every", "5h"}, tranche.TimeGranularity{}, `invalid value "5h" for flag -every`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			var g tranche.TimeGranularity
			fs.TextVar(&g, "every", tranche.Day, "partition granularity")
			err := fs.Parse(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse(%q) error = %v, want %q", tt.args, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, g, granularityEqual); diff != "" {
				t.Errorf("flag -every mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEvery(t *testing.T) {
	units := []tranche.TimeGranularity{tranche.Minute, tranche.Hour, tranche.Day, tranche.Week, tranche.Month, tranche.Quarter, tranche.Year}
	for _, u := range units {
		if got := tranche.Every(1, u); got != u {
			t.Errorf("Every(1, %v) = %v, want %v", u, got, u)
		}
	}
	if tranche.Every(15, tranche.Minute) == tranche.Every(30, tranche.Minute) {
		t.Error("Every(15, Minute) == Every(30, Minute)")
	}
	if tranche.Every(24, tranche.Hour) == tranche.Day {
		t.Error("Every(24, Hour) == Day, but their keys and DST rules differ")
	}
	var zero tranche.TimeGranularity
	if zero.IsValid() || zero.String() != "invalid" {
		t.Errorf("zero TimeGranularity: IsValid %v, String %q; want false, \"invalid\"", zero.IsValid(), zero.String())
	}
}

func TestEveryPanics(t *testing.T) {
	tests := []struct {
		n         int
		unit      tranche.TimeGranularity
		wantPanic string
	}{
		{0, tranche.Day, "between 1 and"},
		{-1, tranche.Hour, "between 1 and"},
		{7, tranche.Minute, "use one of 1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60"},
		{5, tranche.Hour, "use one of 1, 2, 3, 4, 6, 8, 12, 24"},
		{5, tranche.Month, "use one of 1, 2, 3, 4, 6, 12"},
		{3, tranche.Quarter, "use one of 1, 2, 4"},
		{2, tranche.Every(2, tranche.Day), "Every takes a calendar unit"},
		{2, tranche.TimeGranularity{}, "Every takes a calendar unit"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d %v", tt.n, tt.unit), func(t *testing.T) {
			defer func() {
				r := recover()
				msg, _ := r.(string)
				if r == nil || !strings.Contains(msg, tt.wantPanic) {
					t.Errorf("Every(%d, %v) panicked with %v, want a panic containing %q", tt.n, tt.unit, r, tt.wantPanic)
				}
			}()
			tranche.Every(tt.n, tt.unit)
		})
	}
}
