package parquet

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tranche-dev/tranche"
)

// TestFence writes one partition with a sequence of tokens and checks
// which writes are admitted, the fence after each, where it is kept, and
// the rows the partition holds.
func TestFence(t *testing.T) {
	type step struct {
		token int64
		empty bool  // a write of no rows, which leaves no part file
		stale bool  // refused with a *tranche.StaleWriteError
		fence int64 // the fence after the step
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"rising tokens", []step{{1, false, false, 1}, {2, false, false, 2}, {5, false, false, 5}}},
		{"an older token is refused", []step{{3, false, false, 3}, {2, false, true, 3}, {1, false, true, 3}}},
		{"the same token again is admitted: a redelivery", []step{{3, false, false, 3}, {3, false, false, 3}}},
		{"token 0 is not fenced and keeps the fence", []step{{4, false, false, 4}, {0, false, false, 4}, {3, false, true, 4}, {4, false, false, 4}}},
		{"unfenced writes leave no fence", []step{{0, false, false, 0}, {0, false, false, 0}, {1, false, false, 1}}},
		{"a newer token after a refusal", []step{{5, false, false, 5}, {4, false, true, 5}, {6, false, false, 6}}},
		{"an emptied partition keeps its fence beside it", []step{{5, false, false, 5}, {6, true, false, 6}, {5, false, true, 6}, {0, true, false, 6}, {5, true, true, 6}, {7, false, false, 7}, {6, false, true, 7}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &Destination{Dir: t.TempDir()}
			dir := filepath.Dir(d.Path("a", "day", "2026-01-01"))
			var held []tranche.Row // the rows the partition holds
			for i, s := range tt.steps {
				b := batch("a", day(0), s.token, tranche.Row{"token": s.token})
				if s.empty {
					b.Rows = nil
				}
				err := d.Write(t.Context(), []tranche.Batch{b})
				var stale *tranche.StaleWriteError
				switch {
				case s.stale && (!errors.As(err, &stale) || !errors.Is(err, tranche.ErrFenced)):
					t.Fatalf("step %d: Write at token %d = %v; want a *tranche.StaleWriteError matching ErrFenced", i, s.token, err)
				case s.stale:
					want := tranche.StaleWriteError{Asset: "a", Key: "2026-01-01", Token: s.token, Latest: s.fence}
					if *stale != want {
						t.Errorf("step %d: %+v; want %+v", i, *stale, want)
					}
					if msg := err.Error(); !strings.Contains(msg, `asset "a", partition 2026-01-01: write of token`) {
						t.Errorf("step %d: the error %q does not name the partition", i, msg)
					}
				case err != nil:
					t.Fatalf("step %d: Write at token %d: %v", i, s.token, err)
				case s.empty:
					held = nil
				default:
					held = []tranche.Row{{"token": s.token}}
				}
				if f, err := readFence(dir); err != nil || f.Token != s.fence {
					t.Errorf("step %d: the fence is %d, %v; want %d", i, f.Token, err, s.fence)
				}
				// The part file carries the fence; .fence only a
				// partition without one.
				_, err = os.Stat(filepath.Join(dir, fenceFile))
				if sidecar := err == nil; sidecar != (held == nil && s.fence > 0) {
					t.Errorf("step %d: .fence exists: %v; want it only beside no part file", i, sidecar)
				}
				if held != nil {
					if got := fileMeta(t, d.Path("a", "day", "2026-01-01"), metaFence); got != strconv.FormatInt(s.fence, 10) {
						t.Errorf("step %d: the part file's %s is %q; want %d", i, metaFence, got, s.fence)
					}
				}
				rows, err := d.Rows("a", "day", "2026-01-01")
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(held, rows); diff != "" {
					t.Errorf("step %d: rows (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}

// TestFenceAllOrNone checks that a write with one stale batch writes none
// of its batches.
func TestFenceAllOrNone(t *testing.T) {
	d := &Destination{Dir: t.TempDir()}
	ctx := t.Context()
	if err := d.Write(ctx, []tranche.Batch{batch("a", day(1), 7, tranche.Row{"v": 1})}); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, d.Dir)
	err := d.Write(ctx, []tranche.Batch{
		batch("a", day(0), 5, tranche.Row{"v": 2}),
		batch("a", day(1), 5, tranche.Row{"v": 2}),
		batch("a", day(2), 5, tranche.Row{"v": 2}),
	})
	if !errors.Is(err, tranche.ErrFenced) {
		t.Fatalf("Write = %v; want ErrFenced", err)
	}
	after := snapshot(t, d.Dir)
	for name := range after {
		if filepath.Base(name) == PartFile || filepath.Base(name) == fenceFile {
			if _, ok := before[name]; !ok {
				t.Errorf("the refused write left %s", name)
			}
		}
	}
	for name, data := range before {
		if string(after[name]) != string(data) {
			t.Errorf("the refused write changed %s", name)
		}
	}
}

// TestFenceUnreadable checks the errors of a fence that cannot be read:
// each names the file and the remedy, and the write changes nothing.
func TestFenceUnreadable(t *testing.T) {
	tests := []struct {
		name  string
		file  string // the file replaced
		empty bool   // the partition is emptied first, so that .fence holds its fence
	}{
		{"a part file that is no Parquet file", PartFile, false},
		{"a .fence that is no fence", fenceFile, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &Destination{Dir: t.TempDir()}
			b := batch("a", day(0), 2, tranche.Row{"v": 1})
			if err := d.Write(t.Context(), []tranche.Batch{b}); err != nil {
				t.Fatal(err)
			}
			if tt.empty {
				if err := d.Write(t.Context(), []tranche.Batch{batch("a", day(0), 3)}); err != nil {
					t.Fatal(err)
				}
			}
			path := filepath.Join(filepath.Dir(d.Path("a", "day", "2026-01-01")), tt.file)
			if err := os.WriteFile(path, []byte("seven"), 0o666); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, d.Dir)
			err := d.Write(t.Context(), []tranche.Batch{batch("a", day(0), 4, tranche.Row{"v": 2})})
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "delete it to unfence the partition") {
				t.Fatalf("Write over an unreadable fence = %v; want an error naming %s and the remedy", err, path)
			}
			if diff := cmp.Diff(before, snapshot(t, d.Dir)); diff != "" {
				t.Errorf("the refused write changed the folder (-before +after):\n%s", diff)
			}
		})
	}
}

// TestFenceNewDAG checks that tokens are compared whatever the DAG
// identity, as a ledger's tokens order the claims of a partition across
// identities (a deploy): another identity's older token is refused, its
// newer one replaces the partition, in its part file and beside an
// emptied one, and fences the first identity.
func TestFenceNewDAG(t *testing.T) {
	for _, empty := range []bool{false, true} {
		d := &Destination{Dir: t.TempDir()}
		dir := filepath.Dir(d.Path("a", "day", "2026-01-01"))
		write := func(dag string, token int64) error {
			b := batch("a", day(0), token, tranche.Row{"token": token})
			if empty {
				b.Rows = nil
			}
			b.DAG = dag
			return d.Write(t.Context(), []tranche.Batch{b})
		}
		steps := []struct {
			dag   string
			token int64
			stale bool
			want  fence
		}{
			{"old", 5, false, fence{Token: 5, DAG: "old"}},
			{"new", 1, true, fence{Token: 5, DAG: "old"}}, // older than the fence
			{"new", 6, false, fence{Token: 6, DAG: "new"}},
			{"new", 0, false, fence{Token: 6, DAG: "new"}}, // unfenced: keeps the fence
			{"old", 5, true, fence{Token: 6, DAG: "new"}},  // the old identity's stale write
			{"old", 7, false, fence{Token: 7, DAG: "old"}}, // and its newer claim
		}
		for i, s := range steps {
			err := write(s.dag, s.token)
			if s.stale != errors.Is(err, tranche.ErrFenced) || (!s.stale && err != nil) {
				t.Fatalf("empty=%v step %d: Write of DAG %s at token %d = %v; stale %v", empty, i, s.dag, s.token, err, s.stale)
			}
			if f, err := readFence(dir); err != nil || (f != s.want && !(empty && s.want.Token == 0)) {
				t.Errorf("empty=%v step %d: the fence is %+v, %v; want %+v", empty, i, f, err, s.want)
			}
		}
	}
}
