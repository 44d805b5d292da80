// Package trancheweb serves the backfills of a ledger as web pages: an
// index of DAGs and their backfills and, per backfill, its counts per
// state, its progress, why it is not progressing, and a calendar grid of
// its partitions ([backfill.Status.Grid]) whose cells show each
// partition's history when clicked. A backfill's page polls a small JSON
// endpoint while the backfill runs and redraws itself when its counts
// change.
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
// partitions) and to resume it: forms that POST the token, which the
// operator types into the page. The handler compares it with the
// configured token in constant time and answers 403 Forbidden, writing
// nothing, to a missing or wrong token, and to every write while writes
// are disabled. No GET ever writes.
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
//	POST /backfills/{id}/resume              token=…
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
// Requests to the partition and span pages with the header
// X-Tranche-Fragment: 1 get the part of the page the backfill page's
// script shows beside the grid, without the page around it.
package trancheweb
