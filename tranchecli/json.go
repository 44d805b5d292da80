package tranchecli

import (
	"time"

	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
)

// The JSON forms of what the read commands print; the package doc and
// docs/json.md describe them field by field, and TestJSONSchema holds
// the three together.

type backfillJSON struct {
	ID          string `json:"id"`
	DAG         string `json:"dag"`
	DAGName     string `json:"dag_name"`
	Window      string `json:"window"`
	Chosen      int    `json:"chosen"`
	Chunk       int    `json:"chunk"`
	Created     string `json:"created"`
	Canceled    bool   `json:"canceled"`
	StopRunning bool   `json:"stop_running"`
	CanceledAt  string `json:"canceled_at,omitempty"`
	ResumedAt   string `json:"resumed_at,omitempty"`
}

type countsJSON struct {
	Succeeded int `json:"succeeded"`
	Running   int `json:"running"`
	Failed    int `json:"failed"`
	Canceled  int `json:"canceled"`
	Pending   int `json:"pending"`
}

type statusJSON struct {
	Backfill backfillJSON `json:"backfill"`
	Window   string       `json:"window"`
	State    string       `json:"state"`
	Done     bool         `json:"done"`
	Total    int          `json:"total"`
	Counts   countsJSON   `json:"counts"`
	Blocked  []string     `json:"blocked"`
	// Running lists the partitions held by the workers of a backfill
	// that progresses (one finished within a lease): not a reason it is
	// stuck. ETAMS is the time left at the pace of the DAG's recent
	// successes, as a plan estimates it; 0 when unknown or done.
	Running []string `json:"running,omitempty"`
	ETAMS   int64    `json:"eta_ms,omitempty"`
	// Stale counts the partitions whose latest success ran other code
	// than CodeVersion (status only; 0 in --watch lines).
	Stale       int       `json:"stale"`
	CodeVersion string    `json:"code_version"`
	Grid        *gridJSON `json:"grid,omitempty"`
}

type gridJSON struct {
	Cell  string     `json:"cell"`
	Row   string     `json:"row"`
	Cells []cellJSON `json:"cells"`
}

type cellJSON struct {
	Key        string       `json:"key"`
	Row        string       `json:"row"`
	Column     int          `json:"column"`
	Partitions int          `json:"partitions"`
	State      ledger.State `json:"state"`
	Counts     countsJSON   `json:"counts"`
}

type partitionJSON struct {
	Key    string       `json:"key"`
	Start  string       `json:"start"`
	End    string       `json:"end"`
	State  ledger.State `json:"state"`
	Latest *attemptJSON `json:"latest"`
}

type attemptJSON struct {
	Number      int          `json:"number"`
	State       ledger.State `json:"state"`
	Key         string       `json:"key"`
	Start       string       `json:"start"`
	End         string       `json:"end"`
	RunID       string       `json:"run_id"`
	Worker      string       `json:"worker"`
	Backfill    string       `json:"backfill"`
	Trigger     string       `json:"trigger"`
	Started     string       `json:"started"`
	Finished    string       `json:"finished,omitempty"`
	LeaseUntil  string       `json:"lease_until,omitempty"`
	DurationMS  int64        `json:"duration_ms"`
	Rows        int64        `json:"rows"`
	Error       string       `json:"error,omitempty"`
	CodeVersion string       `json:"code_version,omitempty"`
}

type historyJSON struct {
	Backfill string        `json:"backfill"`
	DAG      string        `json:"dag"`
	Key      string        `json:"key"`
	Attempts []attemptJSON `json:"attempts"`
}

type dagStatusJSON struct {
	DAG            string        `json:"dag"`
	Name           string        `json:"name,omitempty"`
	LatestRun      *attemptJSON  `json:"latest_run"`
	LatestBackfill *statusJSON   `json:"latest_backfill"`
	Scheduler      schedulerJSON `json:"scheduler"`
	Limit          *limitJSON    `json:"limit,omitempty"`
	// Assets: a DAG of several granularities, each asset recorded apart.
	Assets []assetJSON `json:"assets,omitempty"`
}

// limitJSON is a DAG's limit of runs at once (ledger.Limiter), when it
// has one.
type limitJSON struct {
	Max     int    `json:"max"`
	By      string `json:"by"`
	Note    string `json:"note,omitempty"`
	Group   string `json:"group,omitempty"`
	Since   string `json:"since"`
	Running int    `json:"running"`
	Waiting int    `json:"waiting_slots"`
}

type schedulerJSON struct {
	Last    *attemptJSON `json:"last"`
	DelayMS int64        `json:"delay_ms"`
	Next    string       `json:"next,omitempty"`
	NextDue string       `json:"next_due,omitempty"`
	Missed  int          `json:"missed"`
	Waiting bool         `json:"waiting"`
	Paused  *pauseJSON   `json:"paused,omitempty"`
}

// pauseJSON is a schedule's pause in force.
type pauseJSON struct {
	By    string `json:"by"`
	Note  string `json:"note,omitempty"`
	Since string `json:"since"`
}

func dagStatusOf(name string, sum *backfill.Summary) dagStatusJSON {
	j := dagStatusJSON{DAG: sum.DAG, Name: name}
	if a := sum.LatestRun; a != nil {
		aj := attemptOf(*a)
		j.LatestRun = &aj
	}
	if s := sum.LatestBackfill; s != nil {
		sj := statusOf(s)
		j.LatestBackfill = &sj
	}
	sc := sum.Scheduler
	j.Scheduler = schedulerJSON{DelayMS: sc.Delay.Milliseconds(), NextDue: stamp(sc.NextDue), Missed: sc.Missed, Waiting: sc.Waiting}
	if sc.Last != nil {
		aj := attemptOf(*sc.Last)
		j.Scheduler.Last = &aj
	}
	if sc.Next.Granularity.IsValid() {
		j.Scheduler.Next = sc.Next.Key()
	}
	if pz := sc.Pause; pz.Paused {
		j.Scheduler.Paused = &pauseJSON{By: pz.By, Note: pz.Note, Since: stamp(pz.Since)}
	}
	if lim := sum.Limit; lim.Max > 0 {
		j.Limit = &limitJSON{Max: lim.Max, By: lim.By, Note: lim.Note, Group: lim.Group, Since: stamp(lim.Since), Running: lim.Running, Waiting: lim.Waiting}
	}
	return j
}

// stamp writes an instant of the ledger's clock in UTC, so that output
// is the same under any TZ; "" for the zero time.
func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func backfillOf(r ledger.BackfillRecord) backfillJSON {
	return backfillJSON{
		ID: r.ID, DAG: r.DAG, DAGName: r.DAGName, Window: r.Window, Chosen: len(r.Partitions), Chunk: max(1, r.Chunk), Created: stamp(r.Created),
		Canceled: r.Canceled, StopRunning: r.StopRunning, CanceledAt: stamp(r.CanceledAt), ResumedAt: stamp(r.ResumedAt),
	}
}

func countsOf(m map[ledger.State]int) countsJSON {
	return countsJSON{
		Succeeded: m[ledger.StateSucceeded], Running: m[ledger.StateRunning], Failed: m[ledger.StateFailed],
		Canceled: m[ledger.StateCanceled], Pending: m[ledger.StatePending],
	}
}

func statusOf(s *backfill.Status) statusJSON {
	total := 0
	for _, n := range s.Counts {
		total += n
	}
	return statusJSON{
		Backfill: backfillOf(s.Record), Window: s.Window.String(), State: string(s.State()), Done: s.Done(), Total: total,
		Counts: countsOf(s.Counts), Blocked: append([]string{}, s.Blocked...),
	}
}

func gridOf(g *backfill.Grid) *gridJSON {
	j := &gridJSON{Cell: g.Cell.String(), Row: g.Row.String(), Cells: make([]cellJSON, len(g.Cells))}
	for i, c := range g.Cells {
		j.Cells[i] = cellJSON{Key: c.Span.Key(), Row: c.Row.Key(), Column: c.Column, Partitions: c.Partitions,
			State: c.State(), Counts: countsOf(c.Counts)}
	}
	return j
}

func partitionOf(ps backfill.PartitionStatus) partitionJSON {
	j := partitionJSON{Key: ps.Partition.Key(), Start: ps.Partition.Start.Format(time.RFC3339),
		End: ps.Partition.End.Format(time.RFC3339), State: ps.State}
	if ps.Latest != nil {
		a := attemptOf(*ps.Latest)
		j.Latest = &a
	}
	return j
}

func attemptOf(a ledger.Attempt) attemptJSON {
	j := attemptJSON{
		Number: a.Number, State: a.State, Key: a.Key, Start: a.Start.Format(time.RFC3339), End: a.End.Format(time.RFC3339),
		RunID: a.RunID, Worker: a.Worker, Backfill: a.Backfill, Trigger: string(a.Trigger), Started: stamp(a.Started), Finished: stamp(a.Finished),
		DurationMS: a.Duration().Milliseconds(), Rows: a.Rows, Error: a.Err, CodeVersion: a.CodeVersion,
	}
	if a.State == ledger.StateRunning {
		j.LeaseUntil = stamp(a.LeaseUntil)
	}
	return j
}
