package parquet

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tranche-dev/tranche"
)

// TestFence writes one partition with a sequence of tokens and checks
// which writes are admitted, the fence after each, and the rows the
// partition holds.
func TestFence(t *testing.T) {
	type step struct {
		token int64
		stale bool  // refused with a *StaleWriteError
		fence int64 // the fence after the step
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"rising tokens", []step{{1, false, 1}, {2, false, 2}, {5, false, 5}}},
		{"an older token is refused", []step{{3, false, 3}, {2, true, 3}, {1, true, 3}}},
		{"the same token again is admitted: a redelivery", []step{{3, false, 3}, {3, false, 3}}},
		{"token 0 is not fenced and keeps the fence", []step{{4, false, 4}, {0, false, 4}, {3, true, 4}, {4, false, 4}}},
		{"unfenced writes leave no fence", []step{{0, false, 0}, {0, false, 0}, {1, false, 1}}},
		{"a newer token after a refusal", []step{{5, false, 5}, {4, true, 5}, {6, false, 6}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &Destination{Dir: t.TempDir()}
			held := int64(-1) // the token whose rows the partition holds
			for i, s := range tt.steps {
				err := d.Write(t.Context(), []tranche.Batch{batch("a", day(0), s.token, tranche.Row{"token": s.token})})
				var stale *StaleWriteError
				switch {
				case s.stale && (!errors.As(err, &stale) || !errors.Is(err, tranche.ErrFenced)):
					t.Fatalf("step %d: Write at token %d = %v; want a *StaleWriteError matching ErrFenced", i, s.token, err)
				case s.stale:
					want := StaleWriteError{Asset: "a", Key: "2026-01-01", Token: s.token, Latest: s.fence}
					if *stale != want {
						t.Errorf("step %d: %+v; want %+v", i, *stale, want)
					}
					if msg := err.Error(); !strings.Contains(msg, `asset "a", partition 2026-01-01: write of attempt`) {
						t.Errorf("step %d: the error %q does not name the partition", i, msg)
					}
				case err != nil:
					t.Fatalf("step %d: Write at token %d: %v", i, s.token, err)
				default:
					held = s.token
				}
				if f, err := readFence(filepath.Join(filepath.Dir(d.Path("a", "day", "2026-01-01")), fenceFile)); err != nil || f.Token != s.fence {
					t.Errorf("step %d: the fence holds %+v, %v; want token %d", i, f, err, s.fence)
				}
				rows, err := d.Rows("a", "day", "2026-01-01")
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff([]tranche.Row{{"token": held}}, rows); diff != "" {
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

func TestFenceCorrupt(t *testing.T) {
	d := &Destination{Dir: t.TempDir()}
	b := batch("a", day(0), 2, tranche.Row{"v": 1})
	if err := d.Write(t.Context(), []tranche.Batch{b}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(filepath.Dir(d.Path("a", "day", "2026-01-01")), fenceFile)
	if err := os.WriteFile(path, []byte("seven"), 0o666); err != nil {
		t.Fatal(err)
	}
	err := d.Write(t.Context(), []tranche.Batch{b})
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "delete it to unfence the partition") {
		t.Fatalf("Write over a corrupt fence = %v; want an error naming %s and the remedy", err, path)
	}
}
