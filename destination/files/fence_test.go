package files_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/destination/files"
	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/memledger"
)

// TestMain runs the test binary as a writer of the files destination when
// TRANCHE_FENCE_WRITER names a folder (see fenceWriter), and as the tests
// otherwise.
func TestMain(m *testing.M) {
	if dir := os.Getenv("TRANCHE_FENCE_WRITER"); dir != "" {
		os.Exit(fenceWriter(dir))
	}
	os.Exit(m.Run())
}

// fenceWriter is a writer process of TestFilesDestinationFencesProcesses:
// once the file "go" exists in dir, it writes fenceDays partitions of
// asset "a" with token TRANCHE_FENCE_TOKEN, fenceRows rows each, every
// row naming the token. It exits 0 when the write landed, 3 when it was
// refused as stale (ErrFenced), 1 on any other error.
func fenceWriter(dir string) int {
	token, err := strconv.ParseInt(os.Getenv("TRANCHE_FENCE_TOKEN"), 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	batches := fenceBatches(token)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go")); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	err = (&files.Destination{Dir: filepath.Join(dir, "warehouse")}).Write(context.Background(), batches)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, tranche.ErrFenced):
		return 3
	}
	fmt.Fprintln(os.Stderr, err)
	return 1
}

const (
	fenceDays = 3
	fenceRows = 3000
)

// fenceBatches returns the batches of one write with the given token.
func fenceBatches(token int64) []tranche.Batch {
	batches := make([]tranche.Batch, fenceDays)
	for d := range batches {
		p := tranche.PartitionOf(tranche.Day, jan1.AddDate(0, 0, d))
		rows := make([]tranche.Row, fenceRows)
		for i := range rows {
			rows[i] = tranche.Row{"day": p.Key(), "token": token, "i": i, "pad": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}
		}
		batches[d] = tranche.Batch{Asset: "a", Column: "day", Partition: p, Rows: rows, RunID: "r", DAG: "dag", Token: token}
	}
	return batches
}

// Writers in separate processes race to write the same partitions with
// different tokens: each write lands whole or is refused as stale, and
// every file ends with the rows of the highest token, never torn, with no
// temporary file left. Without the fence, the last rename wins, whatever
// its token.
func TestFilesDestinationFencesProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts writer processes")
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FENCE_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("FENCE_SEED=%d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	const writers = 6
	for round := range 5 {
		dir := t.TempDir()
		tokens := r.Perm(writers)
		procs := make([]*exec.Cmd, writers)
		outs := make([]*bytes.Buffer, writers)
		for i, tok := range tokens {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "TRANCHE_FENCE_WRITER="+dir, fmt.Sprintf("TRANCHE_FENCE_TOKEN=%d", tok+1))
			outs[i] = new(bytes.Buffer)
			cmd.Stderr = outs[i]
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			procs[i] = cmd
		}
		if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		landed, refused := 0, 0
		for i, cmd := range procs {
			err := cmd.Wait()
			code := cmd.ProcessState.ExitCode()
			switch {
			case code == 0:
				landed++
			case code == 3 && tokens[i]+1 < writers:
				refused++
			default:
				t.Errorf("round %d: writer of token %d: %v\n%s", round, tokens[i]+1, err, outs[i])
			}
		}
		dest := &files.Destination{Dir: filepath.Join(dir, "warehouse")}
		for d := range fenceDays {
			key := tranche.PartitionOf(tranche.Day, jan1.AddDate(0, 0, d)).Key()
			path := dest.Path("a", "day", key)
			tokens := fileTokens(t, path)
			if len(tokens) != fenceRows || tokens[0] != writers || tokens[len(tokens)-1] != writers {
				t.Errorf("round %d: %s holds %d rows, of tokens %v...; want %d rows, all of token %d", round, key, len(tokens), tokens[:min(len(tokens), 3)], fenceRows, writers)
			}
			for _, tok := range tokens {
				if tok != writers {
					t.Errorf("round %d: %s holds a row of token %d among those of %d", round, key, tok, writers)
					break
				}
			}
			if fence, err := os.ReadFile(filepath.Join(filepath.Dir(path), ".fence")); err != nil || !strings.Contains(string(fence), fmt.Sprintf(`"token":%d`, writers)) {
				t.Errorf("round %d: %s's fence %q, %v; want token %d", round, key, fence, err, writers)
			}
			if tmps, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*tmp")); len(tmps) > 0 {
				t.Errorf("round %d: temporary files left: %v", round, tmps)
			}
		}
		t.Logf("round %d: tokens started in the order %v: %d writes landed, %d refused as stale", round, tokens, landed, refused)
	}
}

// fileTokens reads the token of every row of a JSON-lines file, failing
// on a line that does not parse.
func fileTokens(t *testing.T, path string) []int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var tokens []int64
	s := bufio.NewScanner(f)
	for s.Scan() {
		var row struct{ Token int64 }
		if err := json.Unmarshal(s.Bytes(), &row); err != nil {
			t.Fatalf("%s: torn line %q: %v", path, s.Text(), err)
		}
		tokens = append(tokens, row.Token)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return tokens
}

// fencedDestination is a destination that fences writes, read back by
// the rows of an asset's partition.
type fencedDestination interface {
	tranche.Destination
	rows(t *testing.T, asset, key string) []tranche.Row
}

type memoryFenced struct{ *tranche.MemoryDestination }

func (d memoryFenced) rows(_ *testing.T, asset, key string) []tranche.Row {
	rows, _ := d.Rows(asset, key)
	return rows
}

type filesFenced struct{ *files.Destination }

func (d filesFenced) rows(t *testing.T, asset, key string) []tranche.Row {
	data, err := os.ReadFile(d.Path(asset, "day", key))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var rows []tranche.Row
	for line := range strings.Lines(string(data)) {
		var r tranche.Row
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	return rows
}

// The fenced destinations keep each partition's token and refuse an
// older one, all the batches of a write or none; token 0 is not fenced
// and leaves the token as it was; tokens compare whatever the DAG
// identity.
func TestDestinationsFence(t *testing.T) {
	d1, d2 := tranche.PartitionOf(tranche.Day, jan1), tranche.PartitionOf(tranche.Day, jan1.AddDate(0, 0, 1))
	batch := func(p tranche.TimePartition, dag string, token int64, v int) tranche.Batch {
		return tranche.Batch{Asset: "a", Column: "day", Partition: p, RunID: "r", DAG: dag, Token: token,
			Rows: []tranche.Row{{"day": p.Key(), "v": float64(v)}}}
	}
	type write struct {
		batches []tranche.Batch
		stale   bool  // refused, matching ErrFenced
		latest  int64 // the refusal's token of the last write
	}
	steps := []struct {
		name  string
		write write
		want  map[string]float64 // v held by each partition after the step
	}{
		{"first write, token 2", write{batches: []tranche.Batch{batch(d1, "dag", 2, 1), batch(d2, "dag", 2, 1)}},
			map[string]float64{d1.Key(): 1, d2.Key(): 1}},
		{"same token again", write{batches: []tranche.Batch{batch(d1, "dag", 2, 2)}},
			map[string]float64{d1.Key(): 2, d2.Key(): 1}},
		{"newer token", write{batches: []tranche.Batch{batch(d1, "dag", 3, 3)}},
			map[string]float64{d1.Key(): 3, d2.Key(): 1}},
		{"older token refused", write{batches: []tranche.Batch{batch(d1, "dag", 2, 4)}, stale: true, latest: 3},
			map[string]float64{d1.Key(): 3, d2.Key(): 1}},
		{"one stale batch refuses the whole write", write{batches: []tranche.Batch{batch(d1, "dag", 1, 5), batch(d2, "dag", 5, 5)}, stale: true, latest: 3},
			map[string]float64{d1.Key(): 3, d2.Key(): 1}},
		{"token 0 is not fenced", write{batches: []tranche.Batch{batch(d1, "", 0, 6)}},
			map[string]float64{d1.Key(): 6, d2.Key(): 1}},
		{"and keeps the token", write{batches: []tranche.Batch{batch(d1, "dag", 2, 7)}, stale: true, latest: 3},
			map[string]float64{d1.Key(): 6, d2.Key(): 1}},
		// Tokens order the claims of a partition whatever the DAG
		// identity (a deploy): another identity's older token is stale.
		{"another DAG identity's older token refused", write{batches: []tranche.Batch{batch(d1, "dag2", 1, 8)}, stale: true, latest: 3},
			map[string]float64{d1.Key(): 6, d2.Key(): 1}},
		{"another DAG identity's newer token replaces", write{batches: []tranche.Batch{batch(d1, "dag2", 5, 9)}},
			map[string]float64{d1.Key(): 9, d2.Key(): 1}},
		{"and fences the first identity", write{batches: []tranche.Batch{batch(d1, "dag", 4, 10)}, stale: true, latest: 5},
			map[string]float64{d1.Key(): 9, d2.Key(): 1}},
	}
	for _, dest := range []fencedDestination{memoryFenced{new(tranche.MemoryDestination)}, filesFenced{&files.Destination{Dir: t.TempDir()}}} {
		t.Run(fmt.Sprintf("%T", dest), func(t *testing.T) {
			for _, step := range steps {
				err := dest.Write(ctxT, step.write.batches)
				var stale *tranche.StaleWriteError
				switch {
				case step.write.stale && (!errors.Is(err, tranche.ErrFenced) || !errors.As(err, &stale) || stale.Latest != step.write.latest || stale.Asset != "a"):
					t.Errorf("%s: %v; want a *StaleWriteError matching ErrFenced, latest token %d", step.name, err, step.write.latest)
				case !step.write.stale && err != nil:
					t.Errorf("%s: %v", step.name, err)
				}
				for key, v := range step.want {
					if rows := dest.rows(t, "a", key); len(rows) != 1 || rows[0]["v"] != v {
						t.Errorf("%s: partition %s holds %v; want v %v", step.name, key, rows, v)
					}
				}
			}
		})
	}
}

// Backfill attempts at one partition write in order of their tokens: a
// stalled attempt's late write is refused by the fenced destinations.
func TestDestinationsRefuseStaleAttempt(t *testing.T) {
	for _, dest := range []fencedDestination{memoryFenced{new(tranche.MemoryDestination)}, filesFenced{&files.Destination{Dir: t.TempDir()}}} {
		t.Run(fmt.Sprintf("%T", dest), func(t *testing.T) {
			dag := "dag"
			p := tranche.PartitionOf(tranche.Day, jan1)
			l := memledger.New(nil)
			claim := func(worker string, lease time.Duration) *ledger.Lease {
				le, err := l.Claim(ctxT, ledger.ClaimRequest{DAG: dag, Worker: worker, RunID: "r", Partitions: []tranche.TimePartition{p},
					Lease: lease, Policy: ledger.RerunAll})
				if err != nil {
					t.Fatal(err)
				}
				return le
			}
			write := func(le *ledger.Lease) error {
				return dest.Write(ctxT, []tranche.Batch{{Asset: "a", Column: "day", Partition: p, RunID: le.RunID, DAG: le.DAG,
					Token: le.Tokens()[0], Rows: []tranche.Row{{"day": p.Key(), "worker": le.Worker}}}})
			}
			stalled := claim("stalled", time.Millisecond)
			time.Sleep(2 * time.Millisecond) // its lease expires
			newer := claim("newer", time.Minute)
			if err := write(newer); err != nil {
				t.Fatal(err)
			}
			if err := write(stalled); !errors.Is(err, tranche.ErrFenced) {
				t.Errorf("the stalled attempt's late write: %v; want ErrFenced", err)
			}
			if rows := dest.rows(t, "a", p.Key()); len(rows) != 1 || rows[0]["worker"] != "newer" {
				t.Errorf("partition holds %v; want the newer attempt's row", rows)
			}
		})
	}
}
