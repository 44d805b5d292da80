package backfill

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
)

// String summarizes the plan in one line.
func (p *Plan) String() string {
	chosen := ""
	if p.Chosen {
		chosen = " chosen"
	}
	s := fmt.Sprintf("backfill %s of %s: %d%s partitions: %d to run in %d runs, %d succeeded, %d running elsewhere",
		p.Backfill, p.Window, p.Counts.Total, chosen, p.Counts.Run, p.Counts.Runs, p.Counts.SkipSucceeded, p.Counts.SkipRunning)
	if p.Counts.SkipRecorded > 0 {
		s += fmt.Sprintf(", %d failed left alone", p.Counts.SkipRecorded)
	}
	if p.Counts.SkipSuperseded > 0 {
		s += fmt.Sprintf(", %d landed by a newer version", p.Counts.SkipSuperseded)
	}
	if p.Estimate > 0 {
		s += fmt.Sprintf("; about %v", approx(p.Estimate))
	}
	return s
}

// WriteText writes the plan for people: a header, its warnings, and one
// line per partition in run order.
func (p *Plan) WriteText(ctx context.Context, w io.Writer) error {
	var b strings.Builder
	chosen := ""
	if p.Chosen {
		chosen = " chosen"
	}
	dag := p.DAG
	if p.DAGName != "" {
		dag = p.DAGName + " (" + p.DAG + ")"
	}
	fmt.Fprintf(&b, "backfill %s\n  window      %s (%d%s partitions)\n  dag         %s\n", p.Backfill, p.Window, p.Counts.Total, chosen, dag)
	fmt.Fprintf(&b, "  order       %s, %d at a time, %d per run\n  rerun       %s\n  on failure  %s\n  revision    %d\n",
		p.Order, p.Concurrency, p.ChunkSize, p.Rerun, p.OnFailure, p.Revision)
	fmt.Fprintf(&b, "  counts      run %d (%d %s), skip: succeeded %d, skip: running elsewhere %d, skip: recorded %d\n",
		p.Counts.Run, p.Counts.Runs, plural(p.Counts.Runs, "run", "runs"), p.Counts.SkipSucceeded, p.Counts.SkipRunning, p.Counts.SkipRecorded)
	if p.Counts.SkipSuperseded > 0 {
		fmt.Fprintf(&b, "              skip: landed by a newer version %d\n", p.Counts.SkipSuperseded)
	}
	p.mixedText(&b)
	if p.Estimate > 0 {
		fmt.Fprintf(&b, "  estimate    %v\n", p.Estimate.Round(time.Millisecond))
	}
	for _, warn := range p.Warnings {
		fmt.Fprintf(&b, "  warning     %s\n", warn)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	for item, err := range p.Items(ctx) {
		if err != nil {
			return err
		}
		line := "  " + mixedLine(item) + item.Partition.Key() + "  " + string(item.Action) + reasonText(item)
		if a := item.Latest; a != nil {
			line += fmt.Sprintf("  (latest: attempt %d %s by %s", a.Number, a.State, a.Worker)
			if !a.Start.Equal(item.Partition.Start) {
				line += ", at slot " + a.Key + " of a former schedule"
			}
			line += ")"
		}
		if _, err := io.WriteString(w, line+"\n"); err != nil {
			return err
		}
	}
	return nil
}

// planJSON is the JSON form of a plan's header.
type planJSON struct {
	Backfill    string                `json:"backfill"`
	DAG         string                `json:"dag"`
	DAGName     string                `json:"dag_name"`
	Window      string                `json:"window"`
	Chosen      bool                  `json:"chosen,omitempty"`
	ChunkSize   int                   `json:"chunk_size"`
	Order       string                `json:"order"`
	Rerun       ledger.RerunPolicy    `json:"rerun"`
	OnFailure   tranche.FailurePolicy `json:"on_failure"`
	Concurrency int                   `json:"concurrency"`
	Revision    int64                 `json:"revision"`
	Counts      PlanCounts            `json:"counts"`
	EstimateMS  int64                 `json:"estimate_ms,omitempty"`
	Warnings    []string              `json:"warnings"`
}

type planItemJSON struct {
	Key           string        `json:"key"`
	Start         string        `json:"start"`
	End           string        `json:"end"`
	Action        ledger.Action `json:"action"`
	LatestState   ledger.State  `json:"latest_state,omitempty"`
	LatestAttempt int           `json:"latest_attempt,omitempty"`
	LatestWorker  string        `json:"latest_worker,omitempty"`
	LatestKey     string        `json:"latest_key,omitempty"` // the key of a former schedule's slot whose attempt is the latest
	Asset         string        `json:"asset,omitempty"`
	Reason        string        `json:"reason,omitempty"`
}

// WriteJSON writes the plan as one JSON object whose "partitions" array
// lists every partition in run order; it streams, so a plan of a million
// partitions needs no more memory than one of ten.
func (p *Plan) WriteJSON(ctx context.Context, w io.Writer) error {
	head, err := json.Marshal(planJSON{
		Backfill: p.Backfill, DAG: p.DAG, DAGName: p.DAGName, Window: p.Window.String(), Chosen: p.Chosen, ChunkSize: p.ChunkSize, Order: p.Order.String(),
		Rerun: p.Rerun, OnFailure: p.OnFailure, Concurrency: p.Concurrency, Revision: p.Revision,
		Counts: p.Counts, EstimateMS: p.Estimate.Milliseconds(), Warnings: append([]string{}, p.Warnings...),
	})
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "%s,\"partitions\":[", head[:len(head)-1]); err != nil {
		return err
	}
	sep := ""
	for item, err := range p.Items(ctx) {
		if err != nil {
			return err
		}
		j := planItemJSON{Key: item.Partition.Key(), Start: item.Partition.Start.Format(time.RFC3339),
			End: item.Partition.End.Format(time.RFC3339), Action: item.Action, Asset: item.Asset, Reason: item.Reason}
		if a := item.Latest; a != nil {
			j.LatestState, j.LatestAttempt, j.LatestWorker = a.State, a.Number, a.Worker
			if !a.Start.Equal(item.Partition.Start) {
				j.LatestKey = a.Key
			}
		}
		line, err := json.Marshal(j)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "%s\n%s", sep, line); err != nil {
			return err
		}
		sep = ","
	}
	_, err = io.WriteString(w, "]}\n")
	return err
}

// partitions writes n partitions in words: "1 partition", "3 partitions".
func partitions(n int) string { return strconv.Itoa(n) + plural(n, " partition", " partitions") }

// plural returns one when n is 1 and many otherwise.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
