package cron

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tranche-dev/tranche/internal/zone"
)

// Spec is a schedule as a granularity holds it: parsed once, by the root
// package's ParseCron, and read by every package that needs more than
// its text (the partition engine, a DAG's identity, the matching of
// recorded attempts to slots), so that none parses the text again.
// A Spec is immutable once made, but for its cache of schedules by
// location, and safe for concurrent use.
type Spec struct {
	// Text is the canonical text inside "cron(...)": Expr, then
	// "; except" and the sorted excluded dates when there are any.
	Text string
	// Expr is the expression's canonical form, with CRON_TZ= only when
	// the schedule names its zone.
	Expr string
	// Zone is the CRON_TZ zone; nil: the schedule follows the location
	// of the times it is used with.
	Zone *time.Location
	// Excluded are the excluded days, and ExcludedText the same days as
	// written in Text ("2026-12-25"), sorted and without repetitions.
	Excluded     []Date
	ExcludedText []string
	// Cadence and Days say how the schedule fires (see
	// [Schedule.Cadence]).
	Cadence Cadence
	Days    string

	mu    sync.Mutex
	byLoc map[string]*Schedule // the schedule evaluated in each location
}

// NewSpec returns the spec of s, parsed from an expression that named its
// zone (CRON_TZ=) when zoned, excluding the days excluded, written
// excludedText (sorted, without repetitions).
func NewSpec(s *Schedule, zoned bool, excluded []Date, excludedText []string) *Spec {
	spec := &Spec{Expr: s.String(), Excluded: excluded, ExcludedText: excludedText, byLoc: map[string]*Schedule{}}
	spec.Cadence, spec.Days = s.Cadence()
	if zoned {
		spec.Zone = s.Location()
	} else {
		spec.Expr = strings.TrimPrefix(spec.Expr, "CRON_TZ=UTC ")
	}
	spec.Text = spec.Expr
	if len(excludedText) > 0 {
		spec.Text += "; except " + strings.Join(excludedText, " ")
	}
	return spec
}

// interned keeps specs by Text, so that equal schedules share one Spec
// and a granularity holding one stays comparable with ==. It is a
// cache, not state: a value is a pure function of its key.
var interned sync.Map // Text → *Spec

// Intern returns the kept spec of spec.Text, keeping spec when there is
// none yet.
func Intern(spec *Spec) *Spec {
	kept, _ := interned.LoadOrStore(spec.Text, spec)
	return kept.(*Spec)
}

// SpecOf returns the spec whose Text is text (the text inside
// "cron(...)" of a schedule granularity's String), parsed once: the kept
// one when a spec of text was made before, as a granularity's always
// was (by the root package's ParseCron, through Intern).
func SpecOf(text string) (*Spec, error) {
	if kept, ok := interned.Load(text); ok {
		return kept.(*Spec), nil
	}
	expr, except, _ := strings.Cut(text, "; except ")
	s, err := Parse(expr, nil)
	if err != nil {
		return nil, err
	}
	days := strings.Fields(except)
	dates := make([]Date, 0, len(days))
	for _, d := range days {
		t, err := time.Parse(time.DateOnly, d)
		if err != nil {
			return nil, fmt.Errorf("cron: excluded date %q is not a date in %q", d, text)
		}
		dates = append(dates, Date{Year: t.Year(), Month: t.Month(), Day: t.Day()})
	}
	return Intern(NewSpec(s, Zoned(expr), dates, days)), nil
}

// Zoned reports whether expr names its zone (CRON_TZ= or TZ=).
func Zoned(expr string) bool {
	expr = strings.TrimSpace(expr)
	return strings.HasPrefix(expr, "CRON_TZ=") || strings.HasPrefix(expr, "TZ=")
}

// Schedule returns the schedule evaluated in loc, or in the spec's Zone
// when it has one.
func (c *Spec) Schedule(loc *time.Location) *Schedule {
	if c.Zone != nil {
		loc = c.Zone
	}
	name := zone.Name(loc) // unnamed fixed zones of different offsets differ
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.byLoc[name]; ok {
		return s
	}
	s, err := Parse(c.Expr, loc)
	if err != nil {
		panic("tranche: reparsing a parsed cron expression: " + err.Error())
	}
	s = s.Exclude(c.Excluded...)
	c.byLoc[name] = s
	return s
}

// Identity is the text that names the schedule in a DAG's identity: for a
// daily or hourly schedule, its cadence, days, zone and excluded dates
// ("schedule(daily; days * * 1-5; zone Europe/Berlin)"), so that moving
// its minute or hour keeps the identity; "" for an irregular schedule,
// which is named by its text.
func (c *Spec) Identity() string {
	if c.Cadence == Irregular {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "schedule(%s; days %s", c.Cadence, c.Days)
	if c.Zone != nil {
		fmt.Fprintf(&b, "; zone %s", c.Zone)
	}
	if len(c.ExcludedText) > 0 {
		b.WriteString("; except " + strings.Join(c.ExcludedText, " "))
	}
	b.WriteByte(')')
	return b.String()
}
