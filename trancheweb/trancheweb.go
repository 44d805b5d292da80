// Package trancheweb serves the backfills of a ledger as web pages: an
// index of DAGs and their backfills, each backfill with its state,
// progress and age, the failed ones first; per backfill, its state, its
// failures first (how many, the newest error, which partitions), its
// counts per state, its progress, why it is not progressing when it is
// not (nothing runs while partitions are left, or none finished within a
// lease while some are held), and a calendar grid of its
// partitions ([backfill.Status.Grid]) whose cells show each partition's
// history when clicked; and per DAG, the same grid and counts across all
// its backfills ([backfill.WindowGrid]), each partition in the state of
// its latest attempt whichever backfill or run made it, "missing" where
// none did, with its latest run (never a backfill's), its latest
// backfill, what the ledger shows of its live scheduler ("waiting for
// scheduler" when the slot due has not run), and the list of its
// backfills and their states. A page polls
// a small JSON endpoint while its backfill runs (a DAG's, while any of its
// backfills is neither done nor canceled, or a partition runs) and
// redraws itself when its counts change.
//
//	h := trancheweb.NewHandler(lg, &trancheweb.Options{Names: map[string]string{id: "daily_stats"}})
//	http.ListenAndServe("127.0.0.1:8080", h)
//
// The pages are plain HTML from html/template, with one small script and
// one style sheet served by the handler itself: no front-end build, no
// third-party resources. Everything read from the ledger (keys, worker
// names, error texts that assets returned) is escaped by the templates,
// and the pages carry a Content-Security-Policy that allows only the
// handler's own script and style sheet, so that an error text holding
// HTML stays text.
//
// # Writes
//
// By default the handler only reads. With [Options.WriteToken] set, a
// backfill's page offers to cancel it (optionally stopping its running
// partitions) and to resume it, and a DAG's page to pause its schedule
// and resume it (recorded in the ledger, by whom and why, for every
// scheduler of the DAG to obey: see [ledger.Writer.SetSchedulePause]):
// forms that POST the token, which the operator types into the page. The handler compares it with the
// configured token in constant time and answers 403 Forbidden, writing
// nothing, to a missing or wrong token, to a browser's post from a page
// of another origin even when it carries the token (its Sec-Fetch-Site or
// Origin header, as [net/http.CrossOriginProtection] reads them), and to
// every write while writes are disabled. No GET ever writes. A backfill of one of the program's
// DAGs ([Options.DAGs]) is run by this process when it is resumed, and
// its page offers to retry its failed partitions, which runs them again
// here ([backfill.Backfill.Resume] under ledger.RerunFailed): the program
// serving the pages may be the only one that has the DAG.
//
// # Launching backfills
//
// A program that registers its DAGs ([Options.DAGs], as tranchecli's
// serve does) also serves, per DAG, a form that plans a backfill: a
// window (from, to) or, for a cron schedule, slots; the rerun policy,
// the failure policy and the concurrency. The plan page shows the plan
// as backfill.Plan makes it, with its revision; with a write token, a
// form starts exactly that plan: the handler makes the plan again from
// the same fields, gives it the revision the operator saw, and runs it
// with [backfill.Backfill.Execute] in this process (Options.Backfill is
// the template of its runner, worker and lease). When the history of
// the plan's partitions changed since that revision, nothing starts: the
// answer is 409 Conflict, with the new plan and a form to start it. A
// plan that starts redirects to the backfill's page.
//
// # Endpoints
//
//	GET  /                                   the index of DAGs and their backfills
//	GET  /backfills/{id}                     a backfill's page
//	GET  /backfills/{id}/status.json         its status, for polling (below)
//	GET  /backfills/{id}/live                the part of its page that polling redraws: counts, progress, grid
//	GET  /backfills/{id}/partition?start=T   the history of the partition starting at T (RFC 3339)
//	GET  /backfills/{id}/span?from=T&to=U    the backfill's partitions in [T, U), each with its latest attempt
//	POST /backfills/{id}/cancel              token=…, stop_running=on to stop running partitions too
//	POST /backfills/{id}/resume              token=…; a registered DAG's backfill then runs here
//	POST /backfills/{id}/retry               token=…: a registered DAG's backfill runs its failed partitions again here
//	GET  /dags/{dag}?from=T&to=U             a DAG's page: its partitions over the span of its backfills' windows
//	GET  /dags/{dag}/status.json?from=T&to=U its status, for polling (below)
//	GET  /dags/{dag}/live?from=T&to=U        the part of its page that polling redraws: counts, progress, grid, backfills
//	GET  /dags/{dag}/partition?start=T       every attempt at the DAG's partition starting at T (RFC 3339)
//	GET  /dags/{dag}/span?from=T&to=U        the DAG's partitions in [T, U), each with its latest attempt
//	GET  /dags/{dag}/plan?from=&to=&slots=&rerun=&on_failure=&concurrency=
//	                                         a registered DAG's form, and the plan it makes
//	POST /dags/{dag}/backfills               token=…, the plan's fields and revision=: start it (303), or 409 with the new plan
//
// {dag} is the DAG's identity (backfill.DAGIdentity), path-escaped; an
// identity with no backfill in the ledger is 404 Not Found. A DAG's page
// draws the partitions of its granularity from the first partition of
// its oldest-starting backfill to the last of its latest-ending one
// (the span of chosen partitions, for a backfill of chosen partitions),
// and from and to narrow it to the partitions that start in [from, to):
// RFC 3339, or a date or wall time read in the DAG's zone, as
// [backfill.ParseSpan] reads them, a date to meaning through its end (400
// Bad Request otherwise). The plan form reads its from and to by the same
// rule ([backfill.ParseWindow]), as tranchecli's --from and --to. The
// backfills of a DAG share its granularity and zone, which its identity
// names; a daily or hourly cron schedule moved to another minute or hour
// keeps its identity, and the page then draws the newest backfill's
// schedule, the former slots' attempts matched to it by their fire.
// Backfills of one identity that differ otherwise are reported as an
// inconsistent ledger (500).
//
// The status endpoint answers a JSON object:
//
//	{
//	  "id": "…",            // the backfill's id
//	  "dag": "…",           // its DAG's identity
//	  "window": "…",        // its window's text form
//	  "total": 14,          // its partitions
//	  "counts": {"succeeded": 4, "failed": 2, …},  // partitions by the state of their latest attempt
//	  "done": false,        // every partition succeeded
//	  "canceled": false,    // canceled and not resumed since
//	  "blocked": ["…"],     // why it is not progressing (backfill.Status.Blocked)
//	  "signature": "…"      // changes whenever counts or canceled change
//	}
//
// A DAG's status endpoint answers:
//
//	{
//	  "dag": "…",           // the DAG's identity
//	  "window": "…",        // the window drawn; "" when from and to leave none
//	  "total": 14,          // its partitions
//	  "counts": {"succeeded": 4, "missing": 2, …},  // partitions by the state of their latest attempt
//	  "backfills": {"…": "running", …},             // the newest 100 backfills' states: succeeded (done), canceled, running, failed, pending
//	  "running": true,      // a backfill neither done nor canceled, or a partition running: the page polls on
//	  "signature": "…",     // changes whenever counts or a backfill's state change
//	  "latest_run": {"key": "…", "state": "…", "trigger": "live", "started": "…"},  // never a backfill's; null if none
//	  "latest_backfill": "…",  // the open backfill, else the newest failed, else the newest
//	  "waiting": false      // waiting for scheduler: the slot due has not run a lease after it came due
//	}
//
// Requests to the partition and span pages with the header
// X-Tranche-Fragment: 1 get the part of the page the backfill page's
// script shows beside the grid, without the page around it.
package trancheweb
