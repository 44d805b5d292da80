package tranchecli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/internal/cliargs"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/address"
	"github.com/tranche-dev/tranche/schedule"
)

// LedgerEnv is the environment variable that names the ledger when
// neither Program.Ledger nor the --ledger flag does.
const LedgerEnv = "TRANCHE_LEDGER"

// A Program is a command line over a ledger and, optionally, the
// program's own DAGs: Program.Main runs one of its subcommands. The zero
// value of each field takes the default its comment gives; fields must
// not change while Main runs.
type Program struct {
	// Name is the program's name in usage and errors; "" means the base
	// name of os.Args[0].
	Name string

	// Ledger is the ledger every subcommand reads and writes. When it
	// is nil, the subcommand opens the one named by the --ledger flag,
	// or else by $TRANCHE_LEDGER, and closes it at its end if it
	// implements io.Closer.
	Ledger ledger.Ledger

	// OpenLedger opens the ledger the flag or the variable names, an
	// address that [address.Parse] reads (sqlite:PATH,
	// postgres://…, postgres:KEY=VALUE…), for what the subcommand does
	// to it: ls, status, history and plan ask for [address.AccessRead]
	// and so never create, migrate or write the ledger; cancel for
	// [address.AccessWrite]; resume, run and schedule, which run
	// backfills, for [address.AccessCreate]. sqlite.OpenLedger and
	// postgres.OpenLedger are such functions; the program links the
	// drivers it chooses.
	OpenLedger address.OpenFunc

	// Open, when OpenLedger is nil, is given the flag's or the
	// variable's text as it is, whatever the subcommand: it is the
	// older form of OpenLedger, which tells reads from writes.
	Open func(ctx context.Context, url string) (ledger.Ledger, error)

	// DAGs are the program's DAGs by name, which plan, run and schedule
	// take and resume runs here when a backfill's DAG is among them.
	// Without them, plan, run and schedule refuse, and resume leaves the
	// run to workers.
	DAGs map[string]*tranche.DAG

	// Runner runs the partitions of run and resume, and the slots of
	// schedule; nil means a zero Runner.
	Runner *tranche.Runner

	// Worker names this process in the ledger; "" means host-pid.
	Worker string

	// Stdin, Stdout and Stderr are the program's streams; nil means
	// os.Stdin, os.Stdout and os.Stderr. Confirmations are asked, and
	// the grid is coloured, only when they are terminals.
	Stdin          io.Reader
	Stdout, Stderr io.Writer

	// now and after are the clock of schedule's schedulers (see
	// schedule.Scheduler's Now and After), nil for the system's: tests
	// run it under an accelerated one.
	now   func() time.Time
	after func(time.Duration) <-chan time.Time
}

// Exit codes of Program.Main.
const (
	exitOK      = 0
	exitFail    = 1
	exitUsage   = 2
	exitNothing = 3 // the backfill was already as asked: nothing was changed
	exitHeld    = 4 // what ran here succeeded; other workers hold the rest
)

// Main runs the subcommand args name (args excludes the program's
// name, as os.Args[1:]) and returns the process's exit code: 0 when it
// succeeded, 1 when it failed, 2 for bad usage (an unknown subcommand
// or flag, or a flag's value refused), which nothing was written to the
// ledger for, 3 when there was nothing to do and nothing was changed:
// cancel of a backfill that is finished or canceled already, resume of
// one that is not canceled, and 4 when a run or a resume ran what it
// could and all of it succeeded, but other workers (or a live schedule)
// hold partitions that have not succeeded yet: ordinary overlap, not a
// failure; running it again later finishes it. Errors go to Stderr.
func (p *Program) Main(ctx context.Context, args []string) int {
	c := &call{p: p, name: p.Name, stdin: p.Stdin, stdout: p.Stdout, stderr: p.Stderr}
	if c.name == "" {
		c.name = filepath.Base(os.Args[0])
	}
	if c.stdin == nil {
		c.stdin = os.Stdin
	}
	if c.stdout == nil {
		c.stdout = os.Stdout
	}
	if c.stderr == nil {
		c.stderr = os.Stderr
	}
	if args = cliargs.LedgerFirst(args); len(args) == 0 {
		c.usage(c.stderr)
		return exitUsage
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			if cmd := commandNamed(args[1]); cmd != nil {
				fs := c.flags(cmd)
				fs.SetOutput(c.stdout)
				fs.Usage()
				return exitOK
			}
		}
		c.usage(c.stdout)
		return exitOK
	}
	cmd := commandNamed(args[0])
	if cmd != nil && cmd.needsDAGs && len(p.DAGs) == 0 {
		fmt.Fprintf(c.stderr, "%s: %s needs the DAGs of a program built with the package tranchecli, and %s has none; see 'tranchecli' in docs/command.md\n", c.name, cmd.name, c.name)
		c.usage(c.stderr)
		return exitUsage
	}
	if cmd == nil {
		fmt.Fprintf(c.stderr, "%s: unknown command %q\n", c.name, args[0])
		c.usage(c.stderr)
		return exitUsage
	}
	c.cmd = cmd
	fs := c.flags(cmd)
	// A refused flag is reported as any bad usage is, in two lines, as the
	// go command does, not with every flag's default after it; -h prints
	// them all, on standard output.
	fs.SetOutput(io.Discard)
	pos, err := parseInterspersed(fs, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(c.stdout)
		fs.Usage()
		return exitOK
	}
	if err != nil {
		return c.usageError(err)
	}
	if n := len(pos); n < cmd.min || n > cmd.max {
		takes := cmd.args
		if takes == "" {
			takes = "no arguments"
		}
		return c.usageError(fmt.Errorf("%s takes %s; got %d", cmd.name, takes, n))
	}
	c.args = pos
	defer c.closeLedger()
	err = cmd.run(ctx, c)
	var u *usageErr
	var x exitErr
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &u):
		return c.usageError(u.err)
	case errors.As(err, &x):
		return int(x)
	}
	fmt.Fprintf(c.stderr, "%s %s: %s\n", c.name, cmd.name, unprefixed(err))
	return exitFail
}

// unprefixed returns err's message without the "tranche: " its
// packages start their errors with, which after the program's own
// prefix ("tranche status: tranche: ...") says nothing.
func unprefixed(err error) string {
	return strings.ReplaceAll(strings.TrimPrefix(err.Error(), "tranche: "), ": tranche: ", ": ")
}

// A command is one subcommand.
type command struct {
	name, args, summary string
	access              address.Access             // what it does to the ledger, which it is opened for
	help                string                     // what help says beyond the summary; "" for nothing
	min, max            int                        // how many arguments it takes
	flags               func(*call, *flag.FlagSet) // its flags beyond --ledger
	run                 func(context.Context, *call) error
	// programOnly hides the command from the usage of a program without
	// DAGs (the tranche command, which serves pages of its own).
	programOnly bool
	// needsDAGs hides the command from the usage of a program without
	// DAGs, and refuses it there: it does nothing without them.
	needsDAGs bool
}

// commands are the subcommands, in the order usage lists them.
var commands = []*command{
	{name: "ls", summary: "list the backfills of the ledger", flags: readFlags, run: runLs},
	{name: "status", args: "ID", min: 1, max: 1, summary: "a backfill's progress, why it is stuck, and its partitions as a grid", flags: statusFlags, run: runStatus},
	{name: "history", args: "ID KEY", min: 2, max: 2, summary: "every attempt at a partition of a backfill", flags: readFlags, run: runHistory},
	{name: "cancel", args: "ID", min: 1, max: 1, access: address.AccessWrite, summary: "cancel a backfill: workers claim nothing more for it", flags: cancelFlags, run: runCancel},
	{name: "resume", args: "ID", min: 1, max: 1, access: address.AccessCreate, summary: "resume a canceled backfill, running it here when its DAG is registered", flags: resumeFlags, run: runResume},
	{name: "pause", args: "DAG", min: 1, max: 1, access: address.AccessWrite, summary: "pause a DAG's schedule: its schedulers, in every process, start no slot until unpaused", flags: pauseFlags, run: runPause},
	{name: "unpause", args: "DAG", min: 1, max: 1, access: address.AccessWrite, summary: "resume a DAG's paused schedule", flags: pauseFlags, run: runUnpause},
	{name: "limit", args: "DAG [N]", min: 1, max: 2, access: address.AccessWrite, summary: "show, or set to N (0: none), the most runs of a DAG at once across every process; due slots go first", flags: limitFlags, run: runLimit},
	{name: "plan", args: "DAG", min: 1, max: 1, summary: "print what a backfill of DAG would do, writing nothing", flags: planFlags, run: runPlan, needsDAGs: true},
	{name: "run", args: "DAG", min: 1, max: 1, access: address.AccessCreate, summary: "plan a backfill of DAG, confirm it, and run it", flags: runFlags, run: runRun, needsDAGs: true},
	{name: "schedule", args: "[DAG...]", max: math.MaxInt, access: address.AccessCreate, summary: "run each slot of the DAGs as it closes, until interrupted", help: scheduleHelp,
		flags: scheduleFlags, run: runSchedule, needsDAGs: true},
	{name: "serve", summary: "serve the backfills and DAGs as web pages, which plan and start backfills with --allow-writes", help: serveHelp,
		flags: serveFlags, run: runServe, programOnly: true},
	{name: "version", summary: "print the program's version and tranche's, as the build recorded them", flags: func(*call, *flag.FlagSet) {}, run: runVersion},
}

func commandNamed(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// A call is one run of Main: the program, the subcommand, its flags and
// arguments, and the ledger once opened.
type call struct {
	p              *Program
	name           string
	stdin          io.Reader
	stdout, stderr io.Writer
	cmd            *command
	fs             *flag.FlagSet
	args           []string
	opt            options
	ledger         ledger.Reader
	closer         io.Closer
	access         address.Access // what the ledger is opened for, beyond the command's: serve's writes

	staleCount  int    // status: the backfill's stale partitions
	codeVersion string // status: the code version they were judged by
}

// options are every subcommand's flags; each subcommand defines those
// it takes.
type options struct {
	ledgerURL   string
	format      format
	color       colorMode
	watch       bool
	partitions  bool
	interval    time.Duration
	stopRunning bool
	note, by    string

	from, to       string
	slots          []string
	chunk          int
	rerun          ledger.RerunPolicy
	onFailure      tranche.FailurePolicy
	order          backfill.Order
	maxConcurrency int
	maxPartitions  int
	dryRun, yes    bool

	delay, catchUpWindow, lease time.Duration
	maxCatchUp, maxQueue        int
	overlap                     schedule.Overlap
	worker                      string

	addr, tokenFile string
	allowWrites     bool
}

// flags returns the flag set of cmd, printing its usage on errors.
func (c *call) flags(cmd *command) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name+" "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	if c.p.Ledger == nil {
		fs.StringVar(&c.opt.ledgerURL, "ledger", "", "the ledger's `URL` (default $"+LedgerEnv+")")
	}
	cmd.flags(c, fs)
	cliargs.Once(fs, "slot")
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, "usage: %s %s [flags]%s\n\n%s.\n", c.name, cmd.name, spaced(cmd.args), upper(cmd.summary))
		if cmd.help != "" {
			fmt.Fprintf(out, "\n%s\n", cmd.help)
		}
		if cmd.name == "plan" || cmd.name == "run" || cmd.name == "schedule" {
			fmt.Fprintf(out, "\nDAGs: %s\n", strings.Join(c.dagNames(), ", "))
		}
		fmt.Fprintln(out, "\nflags:")
		cliargs.PrintDefaults(out, fs)
	}
	c.fs = fs
	return fs
}

// usage writes the program's usage: its subcommands.
func (c *call) usage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s COMMAND [flags] [arguments]\n\ncommands:\n", c.name)
	for _, cmd := range commands {
		if (cmd.programOnly || cmd.needsDAGs) && len(c.p.DAGs) == 0 {
			continue
		}
		fmt.Fprintf(w, "  %-8s %-8s %s\n", cmd.name, cmd.args, cmd.summary)
	}
	fmt.Fprintf(w, "\nRun '%s help COMMAND' for a command's flags.\n", c.name)
}

// usageError reports bad usage of the subcommand and returns exit code 2.
func (c *call) usageError(err error) int {
	fmt.Fprintf(c.stderr, "%s %s: %v\n", c.name, c.cmd.name, err)
	fmt.Fprintf(c.stderr, "usage: %s %s [flags]%s (see '%s help %s')\n", c.name, c.cmd.name, spaced(c.cmd.args), c.name, c.cmd.name)
	return exitUsage
}

// spaced returns args after a space, or "" for a command without
// arguments.
func spaced(args string) string {
	if args == "" {
		return ""
	}
	return " " + args
}

// usageErr is an error of the command line, found before anything was
// written: Main exits 2.
type usageErr struct{ err error }

func (e *usageErr) Error() string { return e.err.Error() }
func (e *usageErr) Unwrap() error { return e.err }

func badUsage(format string, args ...any) error {
	return &usageErr{fmt.Errorf(format, args...)}
}

// exitErr ends a subcommand with an exit code, having said why already.
type exitErr int

func (e exitErr) Error() string { return fmt.Sprintf("exit %d", int(e)) }

// parseInterspersed parses fs from args, letting flags follow the
// arguments ("status ID --watch"), and returns the arguments. After
// "--", everything is an argument.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// reader returns the program's ledger, opening it the first time for
// what the command does to it: for ls, status, history and plan a
// reader alone, which has no method that writes.
func (c *call) reader(ctx context.Context) (ledger.Reader, error) {
	if c.ledger != nil {
		return c.ledger, nil
	}
	if c.p.Ledger != nil {
		c.ledger = c.p.Ledger
		return c.ledger, nil
	}
	url := c.opt.ledgerURL
	if url == "" {
		url = os.Getenv(LedgerEnv)
	}
	if url == "" {
		return nil, badUsage("no ledger: give --ledger URL or set $%s", LedgerEnv)
	}
	var l ledger.Reader
	switch {
	case c.p.OpenLedger != nil:
		addr, err := address.Parse(url)
		if err != nil {
			return nil, badUsage("%v", err)
		}
		if l, err = c.p.OpenLedger(ctx, addr, c.accessNeeded()); err != nil {
			return nil, err
		}
	case c.p.Open != nil:
		var err error
		if l, err = c.p.Open(ctx, url); err != nil {
			return nil, err
		}
	default:
		return nil, errors.New("tranchecli: the Program has neither a Ledger nor an OpenLedger function")
	}
	c.ledger = l
	if cl, ok := l.(io.Closer); ok {
		c.closer = cl
	}
	return l, nil
}

// accessNeeded is what the command does to the ledger.
func (c *call) accessNeeded() address.Access { return max(c.cmd.access, c.access) }

// writer returns the program's ledger for a command that writes it
// (cancel, resume, pause, run, schedule, serve's writes), opening it the
// first time.
func (c *call) writer(ctx context.Context) (ledger.Ledger, error) {
	r, err := c.reader(ctx)
	if err != nil {
		return nil, err
	}
	l, ok := r.(ledger.Ledger)
	if !ok {
		return nil, fmt.Errorf("tranchecli: the ledger opened for access %v is a %T, which cannot write: an OpenLedger function must return a ledger.Ledger for access write and create", c.accessNeeded(), r)
	}
	return l, nil
}

func (c *call) closeLedger() {
	if c.closer != nil {
		if err := c.closer.Close(); err != nil {
			fmt.Fprintf(c.stderr, "%s: closing the ledger: %v\n", c.name, err)
		}
	}
}

// dagNames returns the names of the registered DAGs, sorted.
func (c *call) dagNames() []string {
	names := make([]string, 0, len(c.p.DAGs))
	for n := range c.p.DAGs {
		names = append(names, n)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return []string{"(none registered)"}
	}
	return names
}

// isTerminal reports whether f is a terminal: a character device other
// than the null device, which a job run with </dev/null has for its
// standard input, and which no one types answers into.
func isTerminal(f any) bool {
	file, ok := f.(*os.File)
	if !ok {
		return false
	}
	info, err := file.Stat()
	if err != nil || info.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(info, null)
}

func upper(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// format is the --format flag: text or json.
type format string

const (
	formatText format = "text"
	formatJSON format = "json"
)

func (f format) MarshalText() ([]byte, error) { return []byte(f), nil }

func (f *format) UnmarshalText(text []byte) error {
	switch s := format(text); s {
	case formatText, formatJSON:
		*f = s
	case "":
		*f = formatText
	default:
		return fmt.Errorf("unknown format %q; want text or json", text)
	}
	return nil
}

// colorMode is the --color flag: auto, always or never.
type colorMode string

func (m colorMode) MarshalText() ([]byte, error) { return []byte(m), nil }

func (m *colorMode) UnmarshalText(text []byte) error {
	switch s := colorMode(text); s {
	case "auto", "always", "never":
		*m = s
	case "":
		*m = "auto"
	default:
		return fmt.Errorf("unknown color mode %q; want auto, always or never", text)
	}
	return nil
}

func readFlags(c *call, fs *flag.FlagSet) {
	c.opt.format = formatText
	fs.TextVar(&c.opt.format, "format", formatText, "output `format`: text or json")
}

func statusFlags(c *call, fs *flag.FlagSet) {
	readFlags(c, fs)
	c.opt.color = "auto"
	fs.TextVar(&c.opt.color, "color", colorMode("auto"), "colour the grid: auto (on a terminal, unless $NO_COLOR is set), always or never")
	fs.BoolVar(&c.opt.watch, "watch", false, "print a line each time the progress changes; exit 0 when the backfill succeeds, 1 when it ends otherwise")
	fs.BoolVar(&c.opt.partitions, "partitions", false, "list every partition with its latest attempt, newest first")
	fs.DurationVar(&c.opt.interval, "interval", time.Second, "the least time between two checks of the ledger by --watch (a check reads what changed since the last)")
}

func cancelFlags(c *call, fs *flag.FlagSet) {
	fs.BoolVar(&c.opt.stopRunning, "stop-running", false, "also stop the partitions running now (recorded canceled) instead of letting them finish")
}

// runPolicyFlags are the flags of how a backfill runs, which resume
// takes too.
func runPolicyFlags(c *call, fs *flag.FlagSet) {
	c.opt.rerun, c.opt.onFailure, c.opt.maxConcurrency = ledger.RerunFailed, tranche.FailStop, 1
	fs.TextVar(&c.opt.rerun, "rerun", ledger.RerunFailed, "which recorded partitions run again: none, failed, all, or stale (the failed ones, and those whose latest success ran other code: an older version of an asset)")
	fs.TextVar(&c.opt.onFailure, "on-failure", tranche.FailStop, "after a failed partition: stop or continue")
	fs.IntVar(&c.opt.maxConcurrency, "max-concurrency", 1, "how many partitions (or chunks) run at once")
	fs.DurationVar(&c.opt.lease, "lease", backfill.DefaultLease, "how long a claim holds without a heartbeat (renewed every third of it); a run after a crash waits up to this long for the dead worker's partitions")
}

func resumeFlags(c *call, fs *flag.FlagSet) {
	runPolicyFlags(c, fs)
	// resume asks nothing, but a script that gives run --yes gives it
	// resume too.
	fs.BoolVar(&c.opt.yes, "yes", false, "accepted for symmetry with run: resume never asks")
}

func planFlags(c *call, fs *flag.FlagSet) {
	readFlags(c, fs)
	backfillFlags(c, fs)
}

// backfillFlags are the flags that choose a backfill and how it runs.
func backfillFlags(c *call, fs *flag.FlagSet) {
	runPolicyFlags(c, fs)
	fs.StringVar(&c.opt.from, "from", "", "the window's first `day or time`, in the DAG's zone unless it has an offset (a date: from its start); for a cron DAG, the first fire")
	fs.StringVar(&c.opt.to, "to", "", "the window's last `day or time`, in the DAG's zone unless it has an offset (a date: through its end; a time: the window's end); for a cron DAG, the last fire, included (empty: now)")
	fs.Func("slot", "a fire `time` of the DAG's schedule whose slot to run (repeatable), in place of --from and --to", func(s string) error {
		c.opt.slots = append(c.opt.slots, s)
		return nil
	})
	fs.IntVar(&c.opt.maxPartitions, "max-partitions", backfill.DefaultMaxPartitions, "the most partitions the window may hold")
	fs.IntVar(&c.opt.chunk, "chunk", 1, "partitions per run (each asset must allow windows beyond 1)")
	c.opt.order = backfill.NewestFirst
	fs.TextVar(&c.opt.order, "order", backfill.NewestFirst, "newest-first or oldest-first")
}

func runFlags(c *call, fs *flag.FlagSet) {
	backfillFlags(c, fs)
	fs.BoolVar(&c.opt.dryRun, "dry-run", false, "print the plan and run nothing")
	fs.BoolVar(&c.opt.yes, "yes", false, "run without asking (required when standard input is not a terminal)")
}

// runVersion prints the main module's version and the tranche module's
// it was built with, from the build information: "(devel)" for a build
// from a work tree that go build could not stamp.
func runVersion(_ context.Context, c *call) error {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return errors.New("tranche: this binary carries no build information")
	}
	fmt.Fprintf(c.stdout, "%s %s (%s %s)\n", c.name, bi.Main.Version, bi.Main.Path, bi.GoVersion)
	if bi.Main.Path == trancheModule {
		return nil
	}
	for _, m := range bi.Deps {
		if m.Path == trancheModule {
			v := m.Version
			if m.Replace != nil {
				v += " => " + m.Replace.Path + " " + m.Replace.Version
			}
			fmt.Fprintf(c.stdout, "%s %s\n", trancheModule, strings.TrimSpace(v))
		}
	}
	return nil
}

// trancheModule is the root module's path.
const trancheModule = "github.com/tranche-dev/tranche"
