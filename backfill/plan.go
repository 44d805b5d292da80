package backfill

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/ledger"
)

// Plan is what a backfill will do, computed before anything runs: every
// partition's action, counts, and an estimate. A dry run is a plan alone.
//
// A plan is computed in one streaming pass over the window and the
// ledger, so its memory does not grow with the window; [Plan.Items]
// streams the partitions again. Revision is the DAG's revision in the
// ledger when the plan was made: [Backfill.Execute] refuses a plan whose
// partitions changed after it, and RerunAll runs again only what
// succeeded up to it.
type Plan struct {
	Backfill string // the backfill's id
	DAG      string // the DAG's identity
	DAGName  string // the DAG's name (tranche.DAG.Name), a label
	// Window is the backfill's window: with chosen partitions
	// ([Backfill.Partitions]), the span from the oldest to the newest.
	Window tranche.TimePartitionWindow
	// Chosen says that the backfill runs chosen partitions of Window,
	// Counts.Total of them, not all of its partitions.
	Chosen      bool
	ChunkSize   int // partitions per run
	Order       Order
	Rerun       ledger.RerunPolicy
	OnFailure   tranche.FailurePolicy
	Concurrency int
	Revision    int64
	Created     time.Time

	Counts PlanCounts

	// Estimate is the expected duration: the median duration of the
	// DAG's 20 most recent successful attempts, wherever they lie
	// ([Reader.RecentSuccesses]), times the rounds of runs at the plan's
	// concurrency. Zero when the DAG has no success recorded, or the plan
	// nothing to run.
	Estimate time.Duration

	// Warnings are things worth knowing before running the plan, such
	// as a plan with nothing to run, which is not recorded in the ledger.
	Warnings []string

	// Assets, for a DAG of several granularities, is each asset's plan,
	// in the DAG's order; Counts sums them. Nil for a DAG of one.
	Assets []AssetPlan

	backfill *Backfill
	// versions and since are config's, as the plan found them.
	versions []string
	since    time.Time
}

// PlanCounts counts a plan's partitions by action, and the runs it makes.
type PlanCounts struct {
	Total         int `json:"total"`
	Run           int `json:"run"`
	SkipSucceeded int `json:"skip_succeeded"`
	SkipRunning   int `json:"skip_running"`
	SkipRecorded  int `json:"skip_recorded"`
	// SkipSuperseded counts ActionSkipSuperseded.
	SkipSuperseded int `json:"skip_superseded,omitempty"`
	Runs           int `json:"runs"` // runs to make: partitions, or chunks
}

// PlanItem is one partition of a plan.
type PlanItem struct {
	Partition tranche.TimePartition
	Action    ledger.Action
	// Latest is the partition's latest recorded attempt; nil if none.
	Latest *ledger.Attempt
	// Chunk is the window of the run that holds the partition: the
	// partition alone, or its chunk.
	Chunk tranche.TimePartitionWindow
	// Asset and Reason, in the plan of a DAG of several granularities,
	// name the asset and why the action ("pending", "failed", "stale:
	// upstream events 2026-03-08T05:00 rematerialized", what blocks it).
	Asset, Reason string
}

// job is one run of a backfill: a partition, or a chunk of partitions,
// with their latest attempts, oldest first.
type job struct {
	window     tranche.TimePartitionWindow
	partitions []tranche.TimePartition
	latest     []*ledger.Attempt
	action     ledger.Action
	runID      string // set when first needed, by one goroutine at a time
	seq        int    // its number in the order of claims, once claimed
	// claimed is when its claim was sent, on the lease keeper's clock.
	claimed time.Duration
}

// planBatch is how many partitions a scan reads from the ledger at once.
const planBatch = 4096

// batches yields the windows of at most batch partitions that a scan
// reads at once, in order: a window's, or each run's of chosen
// partitions, newest first as Chunks splits them.
func (cfg *config) batches(batch int, order Order) iter.Seq[tranche.TimePartitionWindow] {
	return func(yield func(tranche.TimePartitionWindow) bool) {
		for w := range cfg.windows(order) {
			batches := w.Chunks(batch)
			if order == OldestFirst {
				// Chunks run newest first; a window has few batches,
				// so reversing their list costs little.
				list := slices.Collect(batches)
				slices.Reverse(list)
				batches = slices.Values(list)
			}
			for bw := range batches {
				if !yield(bw) {
					return
				}
			}
		}
	}
}

// scan yields the backfill's jobs in order, each with its action judged
// against the ledger at the time of its batch. It holds one batch in
// memory.
func (b *Backfill) scan(ctx context.Context, cfg *config, revision int64, order Order) iter.Seq2[*job, error] {
	return func(yield func(*job, error) bool) {
		batch := cfg.chunk * max(1, planBatch/cfg.chunk)
		now := b.now()
		for bw := range cfg.batches(batch, order) {
			// The batch's partitions, oldest first, and their latest
			// attempts, each batch in a few allocations: the jobs share
			// these slices.
			n := bw.Len()
			parts := make([]tranche.TimePartition, 0, n)
			for p := range bw.OldestFirst() {
				parts = append(parts, p)
			}
			latest := make([]*ledger.Attempt, n)
			if err := cfg.match.ReadLatest(ctx, b.reader(), cfg.dag, parts, latest); err != nil {
				yield(nil, err)
				return
			}
			v, err := b.readVersions(ctx, cfg, bw, now)
			if err != nil {
				yield(nil, err)
				return
			}
			// The batch's chunks come newest first, ending where the
			// previous one starts.
			jobs := make([]job, 0, n/cfg.chunk+1)
			end := n
			for cw := range bw.Chunks(cfg.chunk) {
				start := end - cw.Len()
				jobs = appendJob(jobs, job{window: cw, partitions: parts[start:end:end], latest: latest[start:end:end]}, cfg.rerun, cfg.codeVersion, revision, now, v)
				end = start
			}
			if order == OldestFirst {
				slices.Reverse(jobs)
			}
			for i := range jobs {
				if !yield(&jobs[i], nil) {
					return
				}
			}
		}
	}
}

// partitionAction judges partition p by its latest attempt a, and by
// what other versions of the DAG did there (v), by the ledger's own claim
// rules (ledger.ClaimRequest.Judge and JudgeVersion): a plan never
// disagrees with the ledger that executes it.
func partitionAction(p tranche.TimePartition, a *ledger.Attempt, rerun ledger.RerunPolicy, code string, revision int64, now time.Time, v *versions) ledger.Action {
	req := ledger.ClaimRequest{Policy: rerun, Revision: revision, CodeVersion: code}
	action := req.Judge(a, now)
	if action == ledger.ActionRun && v != nil {
		req.Backfill = v.backfill
		for _, o := range v.at[p.Start.UnixNano()] {
			if o.End.Equal(p.End) {
				if action = req.JudgeVersion(&o, v.since, now); action != ledger.ActionRun {
					break
				}
			}
		}
	}
	return action
}

// versions are the latest attempts of other versions of a backfill's DAG
// at the partitions of a batch, by start (Unix ns), which its claims are
// judged by (ledger.ClaimRequest.JudgeVersion).
type versions struct {
	backfill string
	since    time.Time
	at       map[int64][]ledger.Attempt
}

// readVersions reads the latest attempts of the other versions of the
// DAG (config.versions) at the partitions of window w; nil when there are
// none, or none that can bind a claim.
func (b *Backfill) readVersions(ctx context.Context, cfg *config, w tranche.TimePartitionWindow, now time.Time) (*versions, error) {
	if len(cfg.versions) == 0 || cfg.rerun == ledger.RerunAll {
		return nil, nil
	}
	var v *versions
	for _, dag := range cfg.versions {
		for a, err := range b.reader().Latest(ctx, dag, w.Start(), w.End()) {
			if err != nil {
				return nil, fmt.Errorf("tranche: reading the partitions of %s, another version of the DAG: %w", dag, err)
			}
			if (ledger.ClaimRequest{Backfill: cfg.id, Policy: cfg.rerun}).JudgeVersion(&a, cfg.since, now) == ledger.ActionRun {
				continue
			}
			if v == nil {
				v = &versions{backfill: cfg.id, since: cfg.since, at: map[int64][]ledger.Attempt{}}
			}
			v.at[a.Start.UnixNano()] = append(v.at[a.Start.UnixNano()], a)
		}
	}
	return v, nil
}

// findVersions sets cfg.versions and cfg.since from the ledger's record
// of the backfill: none for a backfill not recorded yet, which nothing
// before it binds, or under RerunAll. name is the DAG's name, which a run
// records.
func (b *Backfill) findVersions(ctx context.Context, cfg *config, name string) error {
	cfg.versions, cfg.since = nil, time.Time{}
	if name == "" || cfg.rerun == ledger.RerunAll {
		return nil
	}
	records, err := b.reader().Backfills(ctx)
	if err != nil {
		return fmt.Errorf("tranche: reading the ledger's backfills: %w", err)
	}
	for _, r := range records {
		if r.ID == cfg.id {
			r.DAGName = name
			cfg.versions, cfg.since = r.Versions(records), r.Created
		}
	}
	return nil
}

// appendJob judges a run by its partitions' actions and appends it to
// jobs. A chunk whose partitions all call for one action stays whole; one
// whose partitions differ (a partition an ordinary run landed, or one a
// backfill of another chunk size holds) is split into runs of consecutive
// partitions with the same action, newest first, since a ledger claims a
// chunk all or nothing and would refuse the whole chunk forever.
func appendJob(jobs []job, u job, rerun ledger.RerunPolicy, code string, revision int64, now time.Time, v *versions) []job {
	u.action = partitionAction(u.partitions[0], u.latest[0], rerun, code, revision, now, v)
	n := len(u.partitions)
	uniform := true
	for i, a := range u.latest[1:] {
		if partitionAction(u.partitions[i+1], a, rerun, code, revision, now, v) != u.action {
			uniform = false
			break
		}
	}
	if uniform {
		return append(jobs, u)
	}
	actions := make([]ledger.Action, n)
	for i, a := range u.latest {
		actions[i] = partitionAction(u.partitions[i], a, rerun, code, revision, now, v)
	}
	for j := n; j > 0; {
		i := j - 1
		for i > 0 && actions[i-1] == actions[j-1] {
			i--
		}
		w, err := tranche.NewTimePartitionWindow(u.window.Granularity(), u.partitions[i].Start, u.partitions[j-1].Start)
		if err != nil {
			panic("tranche: splitting chunk " + u.window.String() + ": " + err.Error()) // unreachable: the partitions are the chunk's
		}
		jobs = append(jobs, job{window: w, partitions: u.partitions[i:j:j], latest: u.latest[i:j:j], action: actions[i]})
		j = i
	}
	return jobs
}

// add counts a job of the plan.
func (c *PlanCounts) add(u *job) {
	c.addN(u.action, len(u.partitions))
	if u.action == ledger.ActionRun {
		c.Runs++
	}
}

// addN counts n partitions of action.
func (c *PlanCounts) addN(action ledger.Action, n int) {
	switch action {
	case ledger.ActionRun:
		c.Run += n
	case ledger.ActionSkipSucceeded:
		c.SkipSucceeded += n
	case ledger.ActionSkipRunning:
		c.SkipRunning += n
	case ledger.ActionSkipRecorded:
		c.SkipRecorded += n
	case ledger.ActionSkipSuperseded:
		c.SkipSuperseded += n
	}
}

// countPlan counts p's partitions by action from lr's counts of their
// latest attempts, grouped by what the claim rule reads, judging one
// sample of each group by the rule itself (partitionAction, through
// ledger.ClaimRequest.Judge). Runs of one partition are its partitions
// to run, from one count of the whole backfill. Chunks, as the scan
// forms them, are the ranges of counts of planRanges chunks each, and
// only the chunks whose runs their counts leave open are read partition
// by partition (countMixedRuns). Memory stays flat.
func (b *Backfill) countPlan(ctx context.Context, cfg *config, lr ledger.LatestReader, p *Plan) error {
	now := b.now()
	req := ledger.CountRequest{DAG: cfg.dag, Now: now, Revision: p.Revision}
	if cfg.chunk == 1 {
		req.Ranges = cfg.ranges()
		counts, err := lr.CountLatest(ctx, req)
		if err != nil {
			return fmt.Errorf("tranche: reading ledger: %w", err)
		}
		attempted := 0
		for _, c := range counts {
			p.Counts.addN(partitionAction(tranche.TimePartition{}, c.Sample(req), cfg.rerun, cfg.codeVersion, p.Revision, now, nil), c.N)
			attempted += c.N
		}
		p.Counts.addN(partitionAction(tranche.TimePartition{}, nil, cfg.rerun, cfg.codeVersion, p.Revision, now, nil), cfg.total-attempted)
		p.Counts.Runs = p.Counts.Run
		return nil
	}
	// Chunks: each chunk is a range of the count, so that its partitions'
	// actions are counted where the scan judges them. The partitions add
	// up by action whether a chunk stays whole or splits (appendJob
	// gives each part its partitions' action), so only a chunk's runs
	// need more: none when no partition is to run, one when all are or
	// only one is; a chunk with two or more to run among others splits
	// into as many runs as it has stretches of partitions to run, which
	// only its partitions say, so those chunks alone are read partition
	// by partition, as the scan reads them.
	pending := partitionAction(tranche.TimePartition{}, nil, cfg.rerun, cfg.codeVersion, p.Revision, now, nil)
	batch := cfg.chunk * max(1, planBatch/cfg.chunk)
	var chunks []tranche.TimePartitionWindow // newest first, as the scan meets them
	flush := func() error {
		if len(chunks) == 0 {
			return nil
		}
		// Ranges in order, oldest first: chunk k is range len-1-k.
		last := len(chunks) - 1
		req.Ranges = make([]ledger.Range, len(chunks))
		for k, cw := range chunks {
			req.Ranges[last-k] = ledger.Range{From: cw.Start(), To: cw.End()}
		}
		counts, err := lr.CountLatest(ctx, req)
		if err != nil {
			return fmt.Errorf("tranche: reading ledger: %w", err)
		}
		attempted := make([]int, len(chunks))
		run := make([]int, len(chunks))
		for _, c := range counts {
			a := partitionAction(tranche.TimePartition{}, c.Sample(req), cfg.rerun, cfg.codeVersion, p.Revision, now, nil)
			p.Counts.addN(a, c.N)
			k := last - c.Range
			attempted[k] += c.N
			if a == ledger.ActionRun {
				run[k] += c.N
			}
		}
		var mixed []tranche.TimePartitionWindow // newest first
		for k, cw := range chunks {
			n := cw.Len()
			p.Counts.addN(pending, n-attempted[k])
			if pending == ledger.ActionRun {
				run[k] += n - attempted[k]
			}
			switch {
			case run[k] == 0:
			case run[k] == 1 || run[k] == n:
				p.Counts.Runs++
			default:
				mixed = append(mixed, cw)
			}
		}
		chunks = chunks[:0]
		return b.countMixedRuns(ctx, cfg, p, mixed, now)
	}
	for bw := range cfg.batches(batch, NewestFirst) {
		for cw := range bw.Chunks(cfg.chunk) {
			if chunks = append(chunks, cw); len(chunks) == planRanges {
				if err := flush(); err != nil {
					return err
				}
			}
		}
	}
	return flush()
}

// planRanges bounds the chunks one count of a chunked plan names.
const planRanges = 4096

// countMixedRuns adds to p.Counts.Runs the runs of chunks, newest first,
// whose partitions to run lie among others: it reads their partitions,
// of adjacent chunks up to planBatch at once (and a chunk), and splits
// them as the scan splits them.
func (b *Backfill) countMixedRuns(ctx context.Context, cfg *config, p *Plan, chunks []tranche.TimePartitionWindow, now time.Time) error {
	for len(chunks) > 0 {
		// As many adjacent chunks as planBatch partitions hold, oldest
		// first for readLatest: the span it reads is theirs alone.
		k, n := 1, chunks[0].Len()
		for k < len(chunks) && chunks[k].End().Equal(chunks[k-1].Start()) && n+chunks[k].Len() <= planBatch {
			n += chunks[k].Len()
			k++
		}
		parts := make([]tranche.TimePartition, 0, n)
		for i := k - 1; i >= 0; i-- {
			for part := range chunks[i].OldestFirst() {
				parts = append(parts, part)
			}
		}
		latest := make([]*ledger.Attempt, n)
		if err := cfg.match.ReadLatest(ctx, b.reader(), cfg.dag, parts, latest); err != nil {
			return err
		}
		end := n
		for _, cw := range chunks[:k] {
			start := end - cw.Len()
			for _, u := range appendJob(nil, job{window: cw, partitions: parts[start:end:end], latest: latest[start:end:end]}, cfg.rerun, cfg.codeVersion, p.Revision, now, nil) {
				if u.action == ledger.ActionRun {
					p.Counts.Runs++
				}
			}
			end = start
		}
		chunks = chunks[k:]
	}
	return nil
}

// Plan computes what [Backfill.Run] would do now, without running or
// writing anything: a dry run.
func (b *Backfill) Plan(ctx context.Context) (*Plan, error) {
	cfg, err := b.config()
	if err != nil {
		return nil, err
	}
	if cfg.mixed {
		return b.planMixed(ctx, cfg)
	}
	return b.plan(ctx, cfg)
}

// PlanFrom plans the backfill as [Backfill.Plan] does, reading r in place
// of b.Ledger, which may be nil: a plan of a ledger opened for reading
// only (sqlite.OpenReader, postgres.OpenReader), to show. Executing it
// ([Backfill.Execute]) takes a Backfill whose Ledger is set.
func (b *Backfill) PlanFrom(ctx context.Context, r ledger.Reader) (*Plan, error) {
	if r == nil {
		return nil, errors.New("tranche: backfill: PlanFrom of a nil reader")
	}
	c := *b
	c.reads = r
	return c.Plan(ctx)
}

func (b *Backfill) plan(ctx context.Context, cfg *config) (*Plan, error) {
	revision, err := b.reader().Revision(ctx, cfg.dag)
	if err != nil {
		return nil, fmt.Errorf("tranche: reading ledger revision: %w", err)
	}
	p := &Plan{
		Backfill: cfg.id, DAG: cfg.dag, DAGName: b.DAG.Name, Window: cfg.window, Chosen: cfg.chosen(), ChunkSize: cfg.chunk, Order: b.Order,
		Rerun: cfg.rerun, OnFailure: cfg.onFailure, Concurrency: cfg.concurrency,
		Revision: revision, Created: b.now(), backfill: b,
	}
	p.Counts.Total = cfg.total
	if err := b.findVersions(ctx, cfg, b.DAG.Name); err != nil {
		return nil, err
	}
	p.versions, p.since = cfg.versions, cfg.since
	lr, ok := b.reader().(ledger.LatestReader)
	// The counts of latest attempts know no code versions, which
	// rerun policy stale reads of each attempt, nor other versions of
	// the DAG, which a deploy leaves.
	ok = ok && cfg.rerun != ledger.RerunStale && len(cfg.versions) == 0
	if ok {
		// As Status.latestReader: a schedule's slots matched by fire
		// are counted only while no former schedule's attempt lies
		// among them.
		if ok, err = countable(ctx, lr, cfg.dag, cfg.match, &cfg.selection); err != nil {
			return nil, err
		}
	}
	if ok {
		if err := b.countPlan(ctx, cfg, lr, p); err != nil {
			return nil, err
		}
	} else {
		for u, err := range b.scan(ctx, cfg, revision, NewestFirst) {
			if err != nil {
				return nil, err
			}
			p.Counts.add(u)
		}
	}
	var durations []ledger.Attempt
	if p.Counts.Runs > 0 || p.Counts.SkipSucceeded > 0 {
		if durations, err = b.reader().RecentSuccesses(ctx, cfg.dag, estimateRuns); err != nil {
			return nil, fmt.Errorf("tranche: reading the DAG's recent successes: %w", err)
		}
	}
	// Partitions skipped as succeeded may have been written by other
	// code: another program whose DAG has the same assets' names,
	// granularity and zone, and so the same identity. The DAG's recent
	// successes tell whether any ran other code; only then are the
	// skipped partitions read one by one, to count them.
	var other otherCode
	if p.Counts.SkipSucceeded > 0 && slices.ContainsFunc(durations, func(a ledger.Attempt) bool { return a.CodeVersion != cfg.codeVersion }) {
		if other, err = b.otherCode(ctx, cfg, revision); err != nil {
			return nil, err
		}
	}
	if p.Counts.Runs == 0 {
		durations = nil // no estimate of nothing
	}
	if len(durations) > 0 {
		ds := make([]time.Duration, len(durations))
		for i, a := range durations {
			ds[i] = a.Duration()
		}
		slices.Sort(ds)
		rounds := (p.Counts.Runs + cfg.concurrency - 1) / cfg.concurrency
		p.Estimate = ds[len(ds)/2] * time.Duration(rounds)
	}
	p.Warnings = b.warnings(p, len(durations) > 0)
	if other.n > 0 {
		p.Warnings = append(p.Warnings, other.warning(cfg.codeVersion, cfg.rerun))
	}
	if lim, ok := b.reader().(ledger.LimitReader); ok && p.Counts.Runs > 0 {
		l, err := lim.Limit(ctx, cfg.dag)
		if err != nil {
			return nil, err
		}
		if w := limitWarning(l, cfg.concurrency); w != "" {
			p.Warnings = append(p.Warnings, w)
		}
	}
	return p, nil
}

// otherCode counts the partitions a plan skips as succeeded whose latest
// success ran under other code versions than the DAG's.
type otherCode struct {
	n        int
	versions []string // the versions they ran, sorted
}

// otherCode reads the latest attempts of the backfill's partitions and
// counts those skipped as succeeded that ran other code.
func (b *Backfill) otherCode(ctx context.Context, cfg *config, revision int64) (otherCode, error) {
	var o otherCode
	for u, err := range b.scan(ctx, cfg, revision, NewestFirst) {
		if err != nil {
			return o, err
		}
		if u.action != ledger.ActionSkipSucceeded {
			continue
		}
		for _, a := range u.latest {
			if a != nil && a.State == ledger.StateSucceeded && a.CodeVersion != cfg.codeVersion {
				o.n++
				if v := a.CodeVersion; !slices.Contains(o.versions, v) {
					o.versions = append(o.versions, v)
				}
			}
		}
	}
	slices.Sort(o.versions)
	return o, nil
}

func (o otherCode) warning(mine string, rerun ledger.RerunPolicy) string {
	quote := func(v string) string {
		if v == "" {
			return "none declared"
		}
		return strconv.Quote(v)
	}
	theirs := make([]string, len(o.versions))
	for i, v := range o.versions {
		theirs[i] = quote(v)
	}
	s := fmt.Sprintf("%s skipped as succeeded ran other code (code version %s; this DAG's is %s): another program with the same asset names, granularity and zone may have written %s",
		partitions(o.n), strings.Join(theirs, ", "), quote(mine), plural(o.n, "it", "them"))
	if rerun != ledger.RerunStale {
		s += "; --rerun stale runs them again"
	}
	return s
}

// estimateRuns is how many of the DAG's recent successes an estimate
// takes the median of.
const estimateRuns = 20

func (b *Backfill) warnings(p *Plan, history bool) []string {
	var w []string
	if p.Counts.Run == 0 {
		w = append(w, "nothing to run: the backfill is not recorded in the ledger")
	}
	if n := p.Counts.SkipRunning; n > 0 {
		w = append(w, fmt.Sprintf("%s %s running elsewhere under %s; this run takes over what stops being renewed, once it expires, and reports the rest held",
			partitions(n), plural(n, "is", "are"), plural(n, "a live lease", "live leases")))
	}
	if n := p.Counts.SkipRecorded; n > 0 {
		w = append(w, fmt.Sprintf("%s failed before and rerun policy none leaves %s failed", partitions(n), plural(n, "it", "them")))
	}
	if p.Rerun == ledger.RerunAll && p.Counts.Run > 0 {
		w = append(w, "rerun policy all runs succeeded partitions again")
	}
	if end := p.Window.End(); end.After(p.Created) {
		w = append(w, fmt.Sprintf("the newest partition %s is not complete yet (it ends %s)", p.Window.Newest().Key(), end.Format(time.RFC3339)))
	}
	if p.Counts.Run > 0 && !history {
		w = append(w, "no successful run of this DAG recorded: no estimate")
	}
	return w
}

// Items streams the plan's partitions in the order the backfill runs
// them, each with its action as the ledger stands now: while no attempt
// at them changed since the plan was made, they are the plan's.
func (p *Plan) Items(ctx context.Context) iter.Seq2[PlanItem, error] {
	if p.Assets != nil {
		return p.mixedItems(ctx)
	}
	return func(yield func(PlanItem, error) bool) {
		cfg, err := p.backfill.config()
		if err != nil {
			yield(PlanItem{}, err)
			return
		}
		cfg.versions, cfg.since = p.versions, p.since
		for u, err := range p.backfill.scan(ctx, cfg, p.Revision, p.Order) {
			if err != nil {
				yield(PlanItem{}, err)
				return
			}
			// A job's partitions are oldest first; newest first walks
			// them backwards.
			n := len(u.partitions)
			for k := range n {
				i := k
				if p.Order == NewestFirst {
					i = n - 1 - k
				}
				if !yield(PlanItem{Partition: u.partitions[i], Action: u.action, Latest: u.latest[i], Chunk: u.window}, nil) {
					return
				}
			}
		}
	}
}
