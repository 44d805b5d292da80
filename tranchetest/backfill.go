package tranchetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/destination/files"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/ledgertest"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// Worker is the worker name [RunBackfill] gives a backfill that names
// none, so that reports and attempts read the same on every run.
const Worker = "tranchetest"

// RunBackfill runs b as [backfill.Backfill.Run] does, on clock: a backfill
// without a Ledger gets a [memledger.New] whose clock is
// clock.Now (b.Ledger holds it after), one without Now gets clock.Now
// for its plans, and one without a Worker is [Worker]. Attempts are then
// stamped with the clock's time, leases are judged by it and expire only
// when the test advances it, and the ledger reads the same on every run.
// A nil clock stands at the window's end, as after the backfill's last
// partition closed. A ledger b already has keeps its own clock.
//
// It returns the report and error of Run, failures included, for the
// test to judge; [RequireSucceededOnce] checks the ledger after.
func RunBackfill(ctx context.Context, clock *ledgertest.Clock, b *backfill.Backfill) (*backfill.Report, error) {
	if clock == nil {
		clock = ledgertest.NewClock(b.Window.End())
	}
	if b.Ledger == nil {
		b.Ledger = memledger.New(clock.Now)
	}
	if b.Now == nil {
		b.Now = clock.Now
	}
	if b.Worker == "" {
		b.Worker = Worker
	}
	return b.Run(ctx)
}

// maxListed bounds the partitions an error of CheckSucceededOnce names.
const maxListed = 10

// CheckSucceededOnce reports whether every partition of b's window has
// succeeded exactly once in b's ledger, for b's DAG: each partition's
// history holds one succeeded attempt, and it is the latest, whatever
// failed before it. The error names the partitions that never succeeded,
// with their latest attempt's state and error, and those that succeeded
// more than once, with the attempts' workers (up to 10 of each). A
// partition that succeeded twice has been written twice: in a backfill,
// that means a lease was lost while its first run was still writing.
func CheckSucceededOnce(ctx context.Context, b *backfill.Backfill) error {
	if b.DAG == nil || b.Ledger == nil {
		return errors.New("tranchetest: CheckSucceededOnce: the backfill has no DAG or no Ledger")
	}
	dag := backfill.DAGIdentity(b.DAG, b.Window.Granularity(), b.Window.Location())
	var missing, twice []string
	nMissing, nTwice := 0, 0
	for p := range b.Window.OldestFirst() {
		history, err := b.Ledger.History(ctx, dag, p.Start)
		if err != nil {
			return fmt.Errorf("tranchetest: history of partition %s: %w", p.Key(), err)
		}
		var succeeded []string
		for _, a := range history {
			if a.State == ledger.StateSucceeded {
				succeeded = append(succeeded, fmt.Sprintf("attempt %d by %s", a.Number, a.Worker))
			}
		}
		switch {
		case len(succeeded) == 0:
			nMissing++
			if len(missing) < maxListed {
				missing = append(missing, p.Key()+": "+describeLatest(history))
			}
		case len(succeeded) > 1:
			nTwice++
			if len(twice) < maxListed {
				twice = append(twice, p.Key()+": "+strings.Join(succeeded, ", "))
			}
		case history[len(history)-1].State != ledger.StateSucceeded:
			nMissing++
			if len(missing) < maxListed {
				missing = append(missing, p.Key()+": succeeded, then "+describeLatest(history))
			}
		}
	}
	if nMissing == 0 && nTwice == 0 {
		return nil
	}
	var b2 strings.Builder
	fmt.Fprintf(&b2, "tranchetest: backfill of %s: %d of %d partitions did not succeed exactly once", b.Window, nMissing+nTwice, b.Window.Len())
	list := func(what string, n int, items []string) {
		if n == 0 {
			return
		}
		fmt.Fprintf(&b2, "\n\t%d %s:", n, what)
		for _, s := range items {
			b2.WriteString("\n\t\t" + s)
		}
		if n > len(items) {
			fmt.Fprintf(&b2, "\n\t\t... and %d more", n-len(items))
		}
	}
	list("not succeeded", nMissing, missing)
	list("succeeded more than once", nTwice, twice)
	return errors.New(b2.String())
}

func describeLatest(history []ledger.Attempt) string {
	if len(history) == 0 {
		return "never attempted"
	}
	a := history[len(history)-1]
	s := fmt.Sprintf("attempt %d by %s %s", a.Number, a.Worker, a.State)
	if a.Err != "" {
		s += ": " + a.Err
	}
	return s
}

// RequireSucceededOnce fails the test unless every partition of b's
// window has succeeded exactly once in b's ledger ([CheckSucceededOnce]).
func RequireSucceededOnce(tb testing.TB, b *backfill.Backfill) {
	tb.Helper()
	requireSucceededOnce(tb.Context(), tb, b)
}

func requireSucceededOnce(ctx context.Context, t testingT, b *backfill.Backfill) {
	t.Helper()
	if err := CheckSucceededOnce(ctx, b); err != nil {
		t.Fatalf("%v", err)
	}
}

// FileRows reads back the rows a [files.Destination] holds for the
// asset's partition with the given key in column ("" and "" for an
// unpartitioned asset), in order, as JSON decodes them: strings, bools,
// nil, nested maps and slices, and numbers as [json.Number], so that
// none loses precision. A time.Time was written as its RFC 3339 text. An
// error wrapping [fs.ErrNotExist] means the partition was never written.
func FileRows(dest *files.Destination, asset, column, key string) ([]tranche.Row, error) {
	path := dest.Path(asset, column, key)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tranchetest: asset %q, partition %q: %w", asset, key, err)
	}
	return decodeRows(path, data)
}

func decodeRows(path string, data []byte) ([]tranche.Row, error) {
	rows := []tranche.Row{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, len(data)+1)
	for line := 1; sc.Scan(); line++ {
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.UseNumber()
		var r tranche.Row
		if err := dec.Decode(&r); err != nil {
			return nil, fmt.Errorf("tranchetest: %s, line %d: %w", path, line, err)
		}
		rows = append(rows, r)
	}
	return rows, sc.Err()
}

// FileKeys returns the keys of the asset's partitions that a
// [files.Destination] holds in column, sorted: the partitions
// whose data.jsonl exists, empty ones included. An asset never written
// has none.
func FileKeys(dest *files.Destination, asset, column string) ([]string, error) {
	// A partition's file is ASSET/COLUMN=KEY/data.jsonl, names escaped:
	// the folder of the key "k" gives the asset's folder and "COLUMN=".
	probe := filepath.Dir(dest.Path(asset, column, "k"))
	dir, prefix := filepath.Dir(probe), strings.TrimSuffix(filepath.Base(probe), "k")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tranchetest: asset %q: %w", asset, err)
	}
	var keys []string
	for _, e := range entries {
		name, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, e.Name(), "data.jsonl")); err != nil {
			continue
		}
		key, err := url.PathUnescape(name)
		if err != nil {
			return nil, fmt.Errorf("tranchetest: asset %q: folder %s is not an escaped key: %w", asset, e.Name(), err)
		}
		keys = append(keys, key)
	}
	slices.Sort(keys)
	return keys, nil
}

// RequireFileRows fails the test unless the [files.Destination]
// holds exactly want, in order, for the asset's partition with the given
// key in column ("" and "" for an unpartitioned asset). Rows are compared
// as JSON: want goes through the encoding the destination applies, so
// 1 and 1.0 are equal and a time.Time equals its RFC 3339 text. An empty
// want requires the partition to have been written with no rows.
func RequireFileRows(tb testing.TB, dest *files.Destination, asset, column, key string, want []tranche.Row) {
	tb.Helper()
	requireFileRows(tb, dest, asset, column, key, want)
}

func requireFileRows(t testingT, dest *files.Destination, asset, column, key string, want []tranche.Row) {
	t.Helper()
	got, err := FileRows(dest, asset, column, key)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			keys, _ := FileKeys(dest, asset, column)
			t.Fatalf("asset %q, partition %q: never written to %s; written partitions: %q", asset, key, dest, keys)
			return
		}
		t.Fatalf("%v", err)
		return
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for i, r := range want {
		if err := enc.Encode(r); err != nil {
			t.Fatalf("RequireFileRows: want row %d does not encode as JSON: %v", i, err)
			return
		}
	}
	norm, err := decodeRows("want", buf.Bytes())
	if err != nil {
		t.Fatalf("RequireFileRows: %v", err)
		return
	}
	if !reflect.DeepEqual(got, norm) {
		t.Fatalf("asset %q, partition %q in %s: rows differ\n\tgot  %v\n\twant %v", asset, key, dest, got, norm)
	}
}
