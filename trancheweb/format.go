package trancheweb

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/tranche-dev/tranche/ledger"
)

// age rounds d for a person: seconds, minutes, hours or days.
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int(d/time.Second), 0))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}

// stateOrder is the order the pages list states in.
var stateOrder = []ledger.State{ledger.StateSucceeded, ledger.StateFailed, ledger.StateRunning, ledger.StateCanceled, ledger.StatePending}

// countData is one state's count.
type countData struct {
	State   ledger.State
	N       int
	Percent float64
}

// counts lists the counts of every state in stateOrder, then any other
// state a newer ledger may record, by name.
func counts(m map[ledger.State]int, total int) []countData {
	var out []countData
	for _, s := range stateOrder {
		out = append(out, countData{s, m[s], percent(m[s], total)})
	}
	for _, s := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(stateOrder, s) {
			out = append(out, countData{s, m[s], percent(m[s], total)})
		}
	}
	return out
}

func percent(n, total int) float64 {
	if total == 0 {
		return 0
	}
	return float64(n) * 100 / float64(total)
}

// instant formats t for a URL: RFC 3339 in UTC.
func instant(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// when formats a time for a person, in its own location; "" if zero.
func when(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format("2006-01-02 15:04:05 Z07:00")
}

// duration formats how long an attempt ran; "" while it runs.
func duration(d time.Duration) string {
	if d == 0 {
		return ""
	}
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}
