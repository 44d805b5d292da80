// Package tranchecli is a command line for operating backfills: a
// program registers its ledger and its DAGs in a [Program] and hands its
// arguments to [Program.Main], which lists, watches, cancels, resumes,
// plans and runs backfills, as Dagu's and dlt's commands do, and keeps
// the DAGs current.
//
//	func main() {
//		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
//		defer stop()
//		p := &tranchecli.Program{Ledger: l, DAGs: map[string]*tranche.DAG{"events": events}}
//		os.Exit(p.Main(ctx, os.Args[1:]))
//	}
//
// A program without DAGs (the tranche command) reads and cancels any
// backfill, and resumes it for the workers that run its DAG.
//
// # The ledger's address
//
// A program that opens its ledger itself sets [Program.OpenLedger], and
// the ledger is named by --ledger or $TRANCHE_LEDGER with an address as
// [address.Parse] reads it, the same in every program and in the
// tranche command: sqlite:PATH (sqlite:///abs/path too),
// postgres://user@host:5432/database?schema=NAME, or
// postgres:host=HOST dbname=DATABASE schema=NAME. The program links the
// drivers it chooses (sqlite.OpenLedger, postgres.OpenLedger, or a
// function choosing between them by [address.Address.Scheme]). The read
// commands (ls, status, history, plan) open the ledger for
// [address.AccessRead]: they never create, migrate or write it, so that
// a read-only file or a role allowed only SELECT can be read; cancel,
// pause, unpause and limit open it for [address.AccessWrite], and resume, run and schedule, which
// run backfills, for [address.AccessCreate].
//
// # Subcommands
//
//	ls                          the backfills of the ledger, oldest first, then a line per DAG
//	status ID                   counts per state, why it is not progressing, and the partitions as a grid
//	status DAG                  a DAG by name or identity: its latest run (never a backfill's), its latest
//	                            backfill, its scheduler (paused, last slot, next due, missed, waiting for scheduler)
//	                            and its limit of runs at once, with what runs and what waits
//	                            and, for a DAG of several granularities, each asset's partitions by state, blocked and stale
//	       --partitions         also each partition's latest attempt, newest first (streamed)
//	       --watch              a line each time the progress changes; exit 0 once it succeeded,
//	                            1 once it ended otherwise (canceled, or failed with nothing running)
//	       --interval 1s        the least time between two checks of the ledger by --watch
//	       --color auto         auto, always or never: colour the grid
//	history ID KEY              every attempt at a partition of the backfill (of a DAG: whichever made it)
//	cancel ID [--stop-running]  workers claim nothing more; with --stop-running they also stop what runs
//	resume ID                   undo a cancel; the backfill runs here when its DAG is registered
//	pause DAG [--note TEXT]     pause the DAG's schedule in the ledger: no scheduler of it, in any process,
//	          [--by WHO]        starts a slot until unpaused; slots due meanwhile are missed (catch-up rules)
//	unpause DAG [--note TEXT]   resume a paused schedule; --by WHO is user@host by default
//	limit DAG [N] [--note TEXT] the most runs of the DAG at once, in every process (schedulers, backfills,
//	          [--by WHO]        runs by hand), held in the ledger: shown, or set to N (0 removes it);
//	                            a due slot goes ahead of every backfill partition not yet started
//	plan DAG FLAGS              what a backfill would do, writing nothing
//	run DAG FLAGS               print the plan, confirm it on a terminal (--yes otherwise), run it
//	schedule [DAG...] FLAGS     run each slot of the DAGs as it closes, until SIGINT or SIGTERM
//	serve [--allow-writes]      the backfills and DAGs as web pages (package trancheweb); with writes and
//	                            $TRANCHE_TOKEN, a DAG's page plans a backfill and starts that plan here
//
// An ID is a backfill's id, or a start of it of 4 characters or more that
// names one backfill only, or a DAG, by the program's name of it, the name
// its backfills recorded, or its identity: cancel then acts on its open
// backfill and resume on its canceled one, refusing a DAG with several.
//
// The flags of plan and run choose the backfill: --from and --to, the
// bounds of its window as [backfill.ParseWindow] reads them, by the one
// rule the pages' form follows too: in the DAG's zone (its
// Partitioning.Location, else UTC; a cron schedule's CRON_TZ), a date
// means the start of that day for --from and its end for --to, so that
// "--from 2026-03-01 --to 2026-03-31" is March, its hours or days, DST
// days whole; a time without an offset is read in that zone, and a time
// ends the window at that instant (for a cron DAG, the last fire,
// included); or --slot, repeated, the fire times of chosen slots
// ([backfill.ParseSlots]: in the same zone, whatever offset spells it, so
// that a slot run alone and a range holding it share one DAG identity); --chunk, partitions per run; --rerun
// none|failed|all|stale (stale: also the partitions whose latest success ran
// other code, see backfill.CodeVersion); --on-failure stop|continue (stop, the default, runs
// none of the partitions after a failure in the run's order; those before
// it finish); --max-concurrency;
// --order newest-first|oldest-first; --max-partitions, the most the
// window may hold (100,000 by default). run takes --dry-run (print the plan
// only) and --yes. A bound that is no time, a wall time the zone skips
// or repeats, an unknown policy, a --slot that is not a fire
// time, --max-concurrency 0, an unknown subcommand or flag: each is bad
// usage, refused before the ledger is opened, with the library's
// message, and Main returns 2. Main returns 1 when a subcommand fails
// (an unknown backfill id among them, named in the message) and 0 when
// it succeeds. Every read command (ls, status, history, plan) takes
// --format text|json.
//
// # Scheduling
//
// schedule runs a [schedule.Scheduler] for each DAG it names, or for
// every registered DAG when it names none, on the program's ledger and
// with its Runner, until SIGINT, SIGTERM or the end of Main's context,
// and then exits 0: a slot still running is canceled and its attempt
// left to its lease, for the next scheduler on the ledger to take over.
// Its flags: --delay, how long after a slot closes it runs;
// --max-catch-up, how many missed slots, the newest, run after downtime
// (5; 0 for none, the older ones being reported missed, for run to
// backfill); --catch-up-window, a bound by time on those;
// --overlap queue|buffer-one|skip|concurrent|cancel-other; --max-queue,
// a bound on the slots waiting under queue; --lease, renewed every third of it;
// --worker, the name in the ledger (Program.Worker by default). A
// negative duration or count, an unknown policy or DAG is bad usage. It
// prints a line as each scheduler starts (its settings and first slot)
// and stops (its counts), and one as each slot starts and ends, or is
// missed, skipped, held by another worker or found done by one. Any
// number of such processes share a ledger, each slot running once;
// backfills, run by run in processes of their own, share the history:
// each skips what the other landed, and a slot a backfill holds is left
// to it.
//
// # The grid
//
// status draws [backfill.Status.Grid] as a calendar: a row per grid row
// (a day of hours, a month of days, a year of months), labelled by its
// key, and a cell per partition in its column, or per hour, day, month
// or year of partitions when there are more than 800, in the state
// [backfill.Cell.State] gives it. On a terminal (Stdout an *os.File
// that is a character device) the cells are coloured: succeeded green,
// failed red, running yellow, canceled magenta, pending grey; $NO_COLOR
// or --color never draws them in plain text, as without a terminal:
// # succeeded, X failed, > running, - canceled, . pending. A legend
// counts the partitions by state. $COLUMNS gives the width (80 by
// default): a row wider than it goes on over the next lines.
//
// # JSON
//
// With --format json, each read command writes JSON whose fields keep
// their names and meanings; fields may be added. Instants of the ledger's
// clock are RFC 3339 in UTC; partition bounds are RFC 3339 in the
// partition's zone. docs/json.md in the repository gives an example of
// each.
//
// ls writes an array of backfill objects:
//
//	id            string   the backfill's id
//	dag           string   the identity of its DAG (backfill.DAGIdentity)
//	dag_name      string   its DAG's name, a label (in ls the newest any backfill of the DAG recorded); "" if none
//	window        string   its window, in the window text form
//	chosen        number   how many chosen partitions it runs; 0 for the whole window
//	chunk         number   partitions per run
//	created       string   when it was recorded
//	canceled      bool     canceled, and not resumed since
//	stop_running  bool     canceled with its running partitions to stop
//	canceled_at   string   when it was last canceled; absent if never
//	resumed_at    string   when it was last resumed; absent if never
//
// status writes one status object (and --watch one a line, without
// "grid", each time the counts change):
//
//	backfill      object   the backfill, as ls writes it
//	window        string   the partitions' span (for chosen ones, oldest to newest)
//	state         string   succeeded, canceled, running, failed or pending
//	done          bool     every partition succeeded
//	total         number   the backfill's partitions
//	counts        object   partitions by the state of their latest attempt: succeeded, running, failed, canceled, pending (numbers)
//	blocked       array    strings: why it is not progressing; empty when done or running freely
//	stale         number   partitions whose latest success ran other code than code_version (0 in --watch lines)
//	code_version  string   the code version judged by: the registered DAG's, else its newest success's; "" for none
//	grid          object   the grid; absent in --watch lines
//	partitions    array    with --partitions only: every partition, newest first
//
// status of a DAG (a registered name, or an identity, rather than a
// backfill's id) writes one object:
//
//	dag             string   the DAG's identity
//	name            string   the program's name of it; absent if none
//	latest_run      object   its newest live, catch-up or manual attempt, as history writes it; null if none
//	latest_backfill object   the status of its open backfill, else of the newest failing, else of the newest; null if none
//	scheduler       object   the live scheduler, as the ledger sees it
//	limit           object   present while the DAG has a limit of runs at once; absent otherwise
//	assets          array    for a DAG of several granularities a program registered, each asset; absent otherwise
//
// An asset:
//
//	asset         string   the asset's name
//	granularity   string   its granularity
//	dag           string   the identity the ledger records its partitions under
//	dag_name      string   that identity's name: the DAG's, "/", the asset's
//	total         number   its partitions in the span its backfills cover
//	states        object   those partitions by the state of their latest attempt (pending, running, succeeded, failed, canceled); a state absent counts none
//	blocked       number   those a backfill would find blocked
//	stale         number   those a partition they map to succeeded again after they began
//
// A scheduler:
//
//	last          object   the latest attempt of the newest slot a scheduler ran (live or catch-up); null if none
//	delay_ms      number   how long after its close that slot started: the scheduler's delay
//	next          string   the key of the slot after it; absent if unknown
//	next_due      string   when that slot comes due; absent if unknown
//	missed        number   slots due since with no attempt
//	waiting       bool     the next slot came due over a lease ago with no run: waiting for scheduler
//	paused        object   present while an operator has paused the schedule; absent otherwise
//
// A pause:
//
//	by            string   who paused it
//	note          string   why, as they said; absent if nothing
//	since         string   when, by the ledger's clock
//
// A limit:
//
//	max           number   at most this many runs of the DAG hold leases at once, across every process
//	by            string   who set it
//	note          string   why, as they said; absent if nothing
//	group         string   the group whose DAGs share it, whose runs and slots the counts are; absent if none
//	since         string   when, by the ledger's clock
//	running       number   the runs holding live leases
//	waiting_slots number   the slots of its schedule waiting for the limit, ahead of every backfill
//
// A grid:
//
//	cell          string   the granularity of a cell: the backfill's, or an hour, day, month or year of partitions
//	row           string   the granularity of a row
//	cells         array    the cells, oldest first; spans without a partition of the backfill left out
//
// A grid cell:
//
//	key           string   the key of the cell's span
//	row           string   the key of its row
//	column        number   its place in the row, from 0
//	partitions    number   the backfill's partitions in it
//	state         string   the state it shows (backfill.Cell.State)
//	counts        object   its partitions by state, as in the status
//
// A partition:
//
//	key           string   the partition's key
//	start         string   its start
//	end           string   its end, excluded
//	state         string   the state of its latest attempt; pending if none
//	latest        object   its latest attempt, as history writes it; null while pending
//
// history writes one object:
//
//	backfill      string   the backfill's id
//	dag           string   its DAG's identity
//	key           string   the partition's key
//	attempts      array    every attempt at the partition, oldest first
//
// An attempt:
//
//	number        number   1 for the first attempt
//	state         string   running, succeeded, failed or canceled
//	key           string   the key of its partition
//	start         string   the partition's start
//	end           string   the partition's end
//	run_id        string   the run that materialized it
//	worker        string   who ran it
//	backfill      string   the backfill it ran in; "" for an ordinary run
//	trigger       string   why it ran: live, catch-up (a scheduler's slot), backfill, manual
//	started       string   when it started
//	finished      string   when it finished; absent while running
//	lease_until   string   while running, when its lease expires
//	duration_ms   number   how long it ran, in milliseconds; 0 while running
//	rows          number   rows it wrote
//	error         string   why it failed; absent when it did not
//	code_version  string   the code version it ran; absent if none was declared
//
// plan writes [backfill.Plan.WriteJSON]'s object: backfill, dag, dag_name,
// window, chosen, chunk_size, order, rerun, on_failure, concurrency,
// revision, counts, estimate_ms, warnings and partitions (key, start,
// end, action, latest_state, latest_attempt, latest_worker, latest_key,
// and for a DAG of several granularities asset and reason).
package tranchecli
