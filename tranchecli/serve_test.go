package tranchecli_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
)

// TestServe runs the program's serve subcommand: the index lists its
// DAGs by name, a DAG's page plans a backfill of it, and with
// --allow-writes and the token the plan starts, run by the program, and
// succeeds. Without --allow-writes it offers no start; a short token is
// refused.
func TestServe(t *testing.T) {
	h := newHarness(t)
	var stderr syncBuffer
	h.p.Stderr = &stderr
	t.Setenv("TRANCHE_TOKEN", "short")
	if code, _, _ := h.run("serve", "--allow-writes"); code != 2 {
		t.Errorf("serve --allow-writes with a short token: exit %d; want 2", code)
	}
	t.Setenv("TRANCHE_TOKEN", "0123456789abcdef0123")
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan int, 1)
	go func() { exited <- h.p.Main(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--allow-writes"}) }()
	var base string
	for deadline := time.Now().Add(10 * time.Second); base == ""; time.Sleep(10 * time.Millisecond) {
		if m := regexp.MustCompile(`serve: (http://\S+)/ `).FindStringSubmatch(stderr.String()); m != nil {
			base = m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve printed no address:\n%s", stderr.String())
		}
	}
	read := func(resp *http.Response, err error) (int, string) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	id := backfill.DAGIdentity(h.p.DAGs["events"], tranche.Day, time.UTC)
	if code, body := read(http.Get(base + "/")); code != 200 || !strings.Contains(body, ">events</a>") || !strings.Contains(body, ">nightly</a>") {
		t.Fatalf("index: %d\n%s", code, body)
	}
	q := url.Values{"from": {"2026-01-01"}, "to": {"2026-01-04"}}
	code, body := read(http.Get(base + "/dags/" + id + "/plan?" + q.Encode()))
	rev := regexp.MustCompile(`name="revision" value="(\d+)"`).FindStringSubmatch(body)
	if code != 200 || rev == nil {
		t.Fatalf("plan: %d\n%s", code, body)
	}
	form := url.Values{"from": q["from"], "to": q["to"], "revision": {rev[1]}, "token": {"0123456789abcdef0123"}}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.PostForm(base+"/dags/"+id+"/backfills", form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("start: %d; want 303", resp.StatusCode)
	}
	bf := strings.TrimPrefix(resp.Header.Get("Location"), "/backfills/")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if s, err := backfill.StatusOf(context.Background(), h.l, bf, time.Now()); err == nil && s.Done() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the backfill started from the page did not succeed")
		}
	}
	cancel()
	if code := <-exited; code != 0 {
		t.Errorf("serve: exit %d after its context ended; want 0\n%s", code, stderr.String())
	}
}
