package trancheweb

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/ledger"
)

// checkToken reports whether r carries the write token, comparing
// digests in constant time (whatever the lengths).
func (h *handler) checkToken(r *http.Request) bool {
	if h.opts.WriteToken == "" {
		return false
	}
	got := sha256.Sum256([]byte(r.PostFormValue("token")))
	return subtle.ConstantTimeCompare(got[:], h.token[:]) == 1
}

// allowWrite reports whether r may write, and refuses it (403
// Forbidden, with what the refusal leaves undone) when it may not: writes
// must be enabled, the request must come from the pages' own origin (its
// Sec-Fetch-Site or Origin header, which a browser sets and a page of
// another site cannot forge, as net/http's CrossOriginProtection reads
// them; a request without them, from a program such as curl, is not a
// browser's), and it must carry the token. The origin is checked too
// because the token is typed into a page and may be remembered by the
// browser, and a page of another site could post it.
func (h *handler) allowWrite(w http.ResponseWriter, r *http.Request, undone string) bool {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	switch {
	case h.opts.WriteToken == "":
		h.refuse(w, r, http.StatusForbidden, "this server is read-only: it was started without writes enabled")
		return false
	case h.origins.Check(r) != nil:
		from := r.Header.Get("Origin")
		if from == "" {
			from = "another site (Sec-Fetch-Site: " + r.Header.Get("Sec-Fetch-Site") + ")"
		}
		h.refuse(w, r, http.StatusForbidden, "a write from a page of "+from+", not of this server: "+undone)
		return false
	case !h.checkToken(r):
		h.refuse(w, r, http.StatusForbidden, "a missing or wrong token: "+undone)
		return false
	}
	return true
}

// write performs a write for a POST that carries the token, then sends
// the browser back to the backfill's page.
func (h *handler) write(w http.ResponseWriter, r *http.Request, do func(ctx context.Context, id string) error) {
	if !h.allowWrite(w, r, "nothing was changed") {
		return
	}
	id := r.PathValue("id")
	if err := do(r.Context(), id); err != nil {
		h.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/backfills/"+url.PathEscape(id), http.StatusSeeOther)
}

func (h *handler) cancel(w http.ResponseWriter, r *http.Request) {
	h.write(w, r, func(ctx context.Context, id string) error {
		// The id of a backfill of several granularities, as its plan
		// shows it, cancels the backfills of its assets.
		return backfill.CancelBackfill(ctx, h.w, id, ledger.CancelOptions{StopRunning: r.PostFormValue("stop_running") == "on"})
	})
}

// resume undoes a cancel; a backfill of a registered DAG then runs here,
// as tranchecli's resume runs it, since the program serving the pages may
// be the only one that has its DAG.
func (h *handler) resume(w http.ResponseWriter, r *http.Request) {
	h.write(w, r, func(ctx context.Context, id string) error {
		return h.runAgain(ctx, id, true)
	})
}

// retry runs the failed and canceled partitions of a backfill of a
// registered DAG again, here, as a rerun of its command does.
func (h *handler) retry(w http.ResponseWriter, r *http.Request) {
	h.write(w, r, func(ctx context.Context, id string) error {
		return h.runAgain(ctx, id, false)
	})
}

// runAgain resumes backfill id (resume) or runs it again (retry) in this
// process when its DAG is registered; a resume of another DAG's backfill
// only marks it resumed, for its workers, and a retry of one is refused.
func (h *handler) runAgain(ctx context.Context, id string, resume bool) error {
	record, err := h.l.Backfill(ctx, id)
	if errors.Is(err, ledger.ErrUnknownBackfill) && resume {
		// The id of a backfill of several granularities resumes the
		// backfills of its assets, for the workers that run them.
		return backfill.ResumeBackfill(ctx, h.w, id)
	}
	if err != nil {
		return err
	}
	b, err := h.registeredBackfill(record)
	switch {
	case err != nil:
		return err
	case b == nil && resume:
		return h.w.ResumeBackfill(ctx, id)
	case b == nil:
		return &badRequest{fmt.Sprintf("backfill %s is of DAG %s, which this program does not register (Options.DAGs): its workers retry it when run again", id, record.DAG)}
	}
	err = h.runHere(ctx, id, b, func(ctx context.Context) error {
		_, err := b.Resume(ctx)
		return err
	})
	if errors.Is(err, errRunningHere) && resume {
		return h.w.ResumeBackfill(ctx, id) // its run here goes on once resumed
	}
	if errors.Is(err, errRunningHere) {
		return nil
	}
	return err
}

// pauseSchedule returns the handler that pauses (or resumes) a DAG's
// schedule for a POST that carries the token, recording the form's by
// ("the pages" when empty) and note, then sends the browser back to the
// DAG's page.
func (h *handler) pauseSchedule(pause bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !h.allowWrite(w, r, "nothing was changed") {
			return
		}
		dag := r.PathValue("dag")
		by := strings.TrimSpace(r.PostFormValue("by"))
		if by == "" {
			by = "the pages"
		}
		p := ledger.SchedulePause{Paused: pause, By: by, Note: strings.TrimSpace(r.PostFormValue("note"))}
		if _, err := h.w.SetSchedulePause(r.Context(), dag, p); err != nil {
			h.fail(w, r, err)
			return
		}
		http.Redirect(w, r, "/dags/"+url.PathEscape(dag), http.StatusSeeOther)
	}
}
