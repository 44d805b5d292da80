package duckdb_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/backfill"
	"github.com/tranche-dev/tranche/destination/column"
	"github.com/tranche-dev/tranche/destination/duckdb"
	"github.com/tranche-dev/tranche/destination/sqldest"
	"github.com/tranche-dev/tranche/ledger/memledger"
	"github.com/tranche-dev/tranche/ledger/sqlledger"
)

// holdEnv, when set, makes the test binary a process that holds the
// DuckDB file it names open until its standard input closes.
const holdEnv = "TRANCHE_DUCKDB_HOLD"

func TestMain(m *testing.M) {
	if path := os.Getenv(holdEnv); path != "" {
		os.Exit(hold(path))
	}
	os.Exit(m.Run())
}

// hold opens the file with the driver alone, as another program would,
// says so, and keeps it open until its standard input closes.
func hold(path string) int {
	db, err := sql.Open("duckdb", path)
	if err == nil {
		_, err = db.Exec("CREATE TABLE IF NOT EXISTS other_program (x INTEGER)")
	}
	if err != nil {
		fmt.Println("failed:", err)
		return 1
	}
	fmt.Println("holding")
	io.Copy(io.Discard, os.Stdin)
	db.Close()
	return 0
}

// holder starts another process holding the file open, and returns it
// once it does.
func holder(t *testing.T, path string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holdEnv+"="+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "holding\n" {
		t.Fatalf("the holding process said %q, %v", line, err)
	}
	return cmd
}

var events = sqldest.Table{Name: "events", Partition: "day", Columns: []sqldest.Column{
	{Name: "day", Type: column.Time},
	{Name: "n", Type: column.Int},
}}

var jan1 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func dayOf(i int) tranche.TimePartition {
	return tranche.PartitionOf(tranche.Day, jan1.AddDate(0, 0, i))
}

func count(t *testing.T, db *sql.DB, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(t.Context(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestLockedFile opens a file that another process holds: the error
// names the file and says what to do, matches sqlledger.ErrLocked, and
// the file's data is untouched; once the other process is gone
// (SIGKILL), the file opens.
func TestLockedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "warehouse.duckdb")
	d, err := duckdb.Open(t.Context(), path, events)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CreateTables(t.Context()); err != nil {
		t.Fatal(err)
	}
	p := dayOf(0)
	if err := d.Write(t.Context(), []tranche.Batch{{Asset: "events", Column: "day", Partition: p, RunID: "r", Token: 1,
		Rows: []tranche.Row{{"day": p.Start, "n": 1}, {"day": p.Start, "n": 2}}}}); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	other := holder(t, path)
	_, err = duckdb.Open(t.Context(), path, events)
	if err == nil {
		t.Fatal("Open of a file another process holds succeeded")
	}
	t.Logf("error: %v", err)
	if _, ok := errors.AsType[*sqlledger.Error](err); !ok || !errors.Is(err, sqlledger.ErrLocked) {
		t.Errorf("Open = %v; want a *sqlledger.Error matching sqlledger.ErrLocked", err)
	}
	for _, s := range []string{"duckdb " + path, "opening " + path, "another process has the DuckDB file open", "one process at a time",
		fmt.Sprintf("PID %d", other.Process.Pid)} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}

	if err := other.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	other.Wait()
	d, err = duckdb.Open(t.Context(), path, events)
	if err != nil {
		t.Fatalf("Open after the other process was killed = %v", err)
	}
	defer d.Close()
	if n := count(t, d.DB(), "events"); n != 2 {
		t.Errorf("the partition holds %d rows after the refused open; want its 2", n)
	}
}

// narrow is a table created by hand with types narrower than the
// kinds' defaults, and a spec of it.
const narrowDDL = `CREATE TABLE narrow (
	day TIMESTAMPTZ NOT NULL,
	tiny TINYINT, utiny UTINYINT, int32 INTEGER, ubig UBIGINT,
	price DECIMAL(4,2), ratio FLOAT, whole DOUBLE,
	name VARCHAR, at_ns TIMESTAMP_NS, at_us TIMESTAMP, at_tz TIMESTAMPTZ, at_s TIMESTAMP_S
)`

var narrow = sqldest.Table{Name: "narrow", Partition: "day", Columns: []sqldest.Column{
	{Name: "day", Type: column.Time},
	{Name: "tiny", Type: column.Int, Null: true},
	{Name: "utiny", Type: column.Int, Null: true},
	{Name: "int32", Type: column.Int, Null: true},
	{Name: "ubig", Type: column.Int, Null: true},
	{Name: "price", Type: column.Float, Null: true},
	{Name: "cents", Key: "price_int", Type: column.Int, Null: true, SQLType: "DECIMAL(4,2)"},
	{Name: "ratio", Type: column.Float, Null: true},
	{Name: "whole", Type: column.Int, Null: true},
	{Name: "name", Type: column.String, Null: true},
	{Name: "at_ns", Type: column.Time, Null: true},
	{Name: "at_us", Type: column.Time, Null: true},
	{Name: "at_tz", Type: column.Time, Null: true},
	{Name: "at_s", Type: column.Time, Null: true},
}}

func openNarrow(t *testing.T) *duckdb.Destination {
	t.Helper()
	d, err := duckdb.Open(t.Context(), filepath.Join(t.TempDir(), "narrow.duckdb"), narrow)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if _, err := d.DB().ExecContext(t.Context(), narrowDDL); err != nil {
		t.Fatal(err)
	}
	if _, err := d.DB().ExecContext(t.Context(), "ALTER TABLE narrow ADD COLUMN cents DECIMAL(4,2)"); err != nil {
		t.Fatal(err)
	}
	return d
}

// snapshot reads the narrow table and the token table as text.
func snapshot(t *testing.T, db *sql.DB) []string {
	t.Helper()
	var out []string
	for _, q := range []string{
		"SELECT CAST(COLUMNS(*) AS VARCHAR) FROM narrow ORDER BY day, tiny",
		"SELECT table_name, start_s, token, run_id FROM tranche_tokens ORDER BY 1, 2",
	} {
		rows, err := db.QueryContext(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]sql.NullString, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, v := range vals {
				s = append(s, fmt.Sprint(v.String))
			}
			out = append(out, strings.Join(s, " | "))
		}
		rows.Close()
	}
	return out
}

// TestValuesThatDoNotFit writes values of the right kind that the
// table's own column types cannot hold: each write is refused with a
// *column.ValueError naming the asset, the partition, the column and
// the value, and the partition (and its token) is as it was.
func TestValuesThatDoNotFit(t *testing.T) {
	d := openNarrow(t)
	p := dayOf(3)
	good := func() []tranche.Row {
		return []tranche.Row{
			{"day": p.Start, "tiny": 1, "name": "a"},
			{"day": p.Start.Add(time.Hour), "tiny": 2, "name": "b"},
			{"day": p.Start.Add(2 * time.Hour), "tiny": 3, "name": "c"},
		}
	}
	write := func(rows []tranche.Row, token int64) error {
		return d.Write(t.Context(), []tranche.Batch{{Asset: "narrow", Column: "day", Partition: p, Rows: rows, RunID: "run", Token: token}})
	}
	if err := write(good(), 1); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, d.DB())

	cases := []struct {
		column string
		value  any
		err    error
		says   []string
	}{
		{"tiny", 300, column.ErrOutOfRange, []string{"int64 300", "TINYINT's range, -128 to 127"}},
		{"tiny", -129, column.ErrOutOfRange, []string{"int64 -129", "-128 to 127"}},
		{"utiny", -1, column.ErrOutOfRange, []string{"int64 -1", "UTINYINT's range, 0 to 255"}},
		{"int32", int64(1) << 31, column.ErrOutOfRange, []string{"int64 2147483648", "INTEGER's range"}},
		{"ubig", -5, column.ErrOutOfRange, []string{"int64 -5", "UBIGINT"}},
		{"price", 99.995, column.ErrOutOfRange, []string{"float64 99.995", "at most 2 digits before the point", "DECIMAL(4,2)"}},
		{"price", math.NaN(), column.ErrOutOfRange, []string{"float64 NaN", "DECIMAL(4,2)"}},
		{"price_int", 100, column.ErrOutOfRange, []string{`column "cents"`, "int64 100", "DECIMAL(4,2)"}},
		{"ratio", 1e39, column.ErrOutOfRange, []string{"float64 1e+39", "FLOAT"}},
		{"whole", int64(1)<<53 + 1, column.ErrOutOfRange, []string{"int64 9007199254740993", "2^53", "DOUBLE"}},
		{"name", "caf\xe9", column.ErrOutOfRange, []string{`string "caf\xe9"`, "valid UTF-8", "VARCHAR"}},
		{"at_ns", time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), column.ErrOutOfRange, []string{"time.Time 2300-01-01T00:00:00Z", "TIMESTAMP_NS", "2262-04-11T23:47:16.854775807Z"}},
		{"at_us", time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC), column.ErrOutOfRange, []string{"time.Time 300000-01-01T00:00:00Z", "TIMESTAMP"}},
		{"at_tz", time.Date(-300000, 1, 1, 0, 0, 0, 0, time.UTC), column.ErrOutOfRange, []string{"TIMESTAMP WITH TIME ZONE"}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s=%v", c.column, c.value), func(t *testing.T) {
			rows := good()
			rows[1][c.column] = c.value
			err := write(rows, 2)
			ve, ok := errors.AsType[*column.ValueError](err)
			if !ok || !errors.Is(err, c.err) {
				t.Fatalf("Write = %v; want a *column.ValueError matching %v", err, c.err)
			}
			t.Logf("error: %v", err)
			col := c.column
			if col == "price_int" {
				col = "cents"
			}
			if ve.Asset != "narrow" || ve.Partition != p.Key() || ve.Column != col || ve.Row != 1 || ve.Table != "narrow" {
				t.Errorf("ValueError %+v; want asset narrow, partition %s, column %s, row 1", ve, p.Key(), col)
			}
			for _, s := range append(c.says, d.String(), `asset "narrow"`, "partition "+p.Key(), "row 1", fmt.Sprintf("column %q", col)) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if diff := cmp.Diff(before, snapshot(t, d.DB())); diff != "" {
				t.Errorf("a refused write changed the partition or its token (-before +after):\n%s", diff)
			}
		})
	}
}

// TestValuesThatFit writes the bounds of the narrow types, and reads
// them back as DuckDB stored them.
func TestValuesThatFit(t *testing.T) {
	d := openNarrow(t)
	p := dayOf(4)
	at := time.Date(2026, 1, 4, 12, 30, 15, 123456789, time.FixedZone("+0545", 5*3600+45*60))
	rows := []tranche.Row{
		{"day": p.Start, "tiny": 127, "utiny": 255, "int32": math.MaxInt32, "ubig": uint64(math.MaxInt64),
			"price": 99.99, "price_int": -99, "ratio": 3.5, "whole": int64(1) << 53, "name": "a\x00b é",
			"at_ns": at, "at_us": at, "at_tz": at, "at_s": at},
		{"day": p.Start.Add(time.Minute), "tiny": -128, "utiny": 0, "int32": math.MinInt32, "ubig": 0,
			"price": -0.005, "price_int": 0, "ratio": -math.MaxFloat32, "whole": -(int64(1) << 53)},
	}
	if err := d.Write(t.Context(), []tranche.Batch{{Asset: "narrow", Column: "day", Partition: p, Rows: rows, RunID: "run"}}); err != nil {
		t.Fatal(err)
	}
	got := snapshot(t, d.DB())
	want := []string{
		"2026-01-05 00:00:00+00 | 127 | 255 | 2147483647 | 9223372036854775807 | 99.99 | 3.5 | 9007199254740992.0 | a\x00b é | " +
			"2026-01-04 06:45:15.123456789 | 2026-01-04 06:45:15.123456 | 2026-01-04 06:45:15.123456+00 | 2026-01-04 06:45:15 | -99.00",
		"2026-01-05 00:01:00+00 | -128 | 0 | -2147483648 | 0 | -0.01 | -3.4028235e+38 | -9007199254740992.0 |  |  |  |  |  | 0.00",
		"narrow | 1767571200 | 0 | run",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the values as stored (-want +got):\n%s", diff)
	}
}

// TestTableThatDoesNotFit writes into columns whose types take no value
// of the spec's kinds, and into a table that is missing.
func TestTableThatDoesNotFit(t *testing.T) {
	d, err := duckdb.Open(t.Context(), "", sqldest.Table{Name: "t", Partition: "day", Columns: []sqldest.Column{
		{Name: "day", Type: column.Time},
		{Name: "n", Type: column.Int},
	}}, sqldest.Table{Name: "u", Columns: []sqldest.Column{{Name: "id", Type: column.String}}},
		sqldest.Table{Name: "missing", Columns: []sqldest.Column{{Name: "id", Type: column.String}}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, q := range []string{"CREATE TABLE t (day TIMESTAMPTZ NOT NULL, n VARCHAR)", "CREATE TABLE u (id UUID)"} {
		if _, err := d.DB().ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	p := dayOf(0)
	err = d.Write(t.Context(), []tranche.Batch{{Asset: "t", Column: "day", Partition: p, Rows: []tranche.Row{{"day": p.Start, "n": 7}}}})
	if !errors.Is(err, column.ErrMistyped) || !strings.Contains(err.Error(), `column "n": int64 7 is not a value of the column's type in the table, VARCHAR: an Int column needs an integer type`) ||
		!strings.Contains(err.Error(), "partition "+p.Key()) {
		t.Errorf("an Int into a VARCHAR column = %v", err)
	}
	err = d.Write(t.Context(), []tranche.Batch{{Asset: "u", Rows: []tranche.Row{{"id": "x"}}}})
	if err == nil || !strings.Contains(err.Error(), `table u, column "id": the column's type UUID is none that the destination writes`) {
		t.Errorf("a write into a UUID column = %v", err)
	}
	err = d.Write(t.Context(), []tranche.Batch{{Asset: "missing", Rows: []tranche.Row{{"id": "x"}}}})
	if err == nil || !strings.Contains(err.Error(), "create the tables first") {
		t.Errorf("a write into a missing table = %v", err)
	}
	for _, table := range []string{"t", "u"} {
		if n := count(t, d.DB(), table); n != 0 {
			t.Errorf("table %s holds %d rows after refused writes", table, n)
		}
	}
}

// TestNaiveTimestampNeedsUTC writes into a TIMESTAMP partition column
// through a database of the caller's whose zone is not UTC: refused,
// since DuckDB would compare the column with the partition's bounds in
// that zone.
func TestNaiveTimestampNeedsUTC(t *testing.T) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // one connection, whose zone the SET changes
	tbl := sqldest.Table{Name: "naive", Partition: "day", Columns: []sqldest.Column{{Name: "day", Type: column.Time, SQLType: "TIMESTAMP"}}}
	d, err := duckdb.New(t.Context(), db, "duckdb mine", tbl)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CreateTables(t.Context()); err != nil {
		t.Fatal(err)
	}
	p := dayOf(0)
	write := func() error {
		return d.Write(t.Context(), []tranche.Batch{{Asset: "naive", Column: "day", Partition: p, Rows: []tranche.Row{{"day": p.Start}}}})
	}
	if _, err := db.ExecContext(t.Context(), "SET TimeZone = 'Asia/Kathmandu'"); err != nil {
		t.Fatal(err)
	}
	if err := write(); err == nil || !strings.Contains(err.Error(), `column "day": a TIMESTAMP column (without time zone) needs the connections' zone to be UTC`) ||
		!strings.Contains(err.Error(), "Asia/Kathmandu") {
		t.Errorf("a write into a TIMESTAMP column in Asia/Kathmandu = %v", err)
	}
	if _, err := db.ExecContext(t.Context(), "SET TimeZone = 'UTC'"); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second replaces the first
		if err := write(); err != nil {
			t.Fatal(err)
		}
	}
	if n := count(t, db, "naive"); n != 1 {
		t.Errorf("the TIMESTAMP table holds %d rows; want 1", n)
	}
}

// TestBackfillWithABadValue runs a backfill one of whose partitions
// produces a value that does not fit: that partition fails with the
// error naming its asset, partition, column and value, holds nothing,
// and the others are written.
func TestBackfillWithABadValue(t *testing.T) {
	d := openNarrow(t)
	w, err := tranche.NewTimePartitionWindow(tranche.Day, jan1, jan1.AddDate(0, 0, 4))
	if err != nil {
		t.Fatal(err)
	}
	bad := dayOf(2)
	dag, err := tranche.NewDAG(tranche.Asset{
		Name:         "narrow",
		Partitioning: tranche.Partitioning{Granularity: tranche.Day, Location: time.UTC, Column: "day"},
		Destinations: []tranche.Destination{d},
		Materialize: func(ctx context.Context, m *tranche.Materialization) ([]tranche.Row, error) {
			p, err := m.Partition()
			tiny := 1
			if p == bad {
				tiny = 1000
			}
			return []tranche.Row{{"day": p.Start, "tiny": tiny}}, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := (&backfill.Backfill{DAG: dag, Window: w, Ledger: memledger.New(nil), OnFailure: tranche.FailContinue}).Run(t.Context())
	if err == nil || res.Succeeded != 4 || res.Failed != 1 {
		t.Fatalf("Backfill = %+v, %v; want 4 succeeded and 1 failed", res, err)
	}
	for _, s := range []string{`asset "narrow"`, "partition " + bad.Key(), `column "tiny"`, "int64 1000", "TINYINT"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the backfill's error %q does not say %q", err, s)
		}
	}
	var n int
	if err := d.DB().QueryRowContext(t.Context(), "SELECT count(*) FROM narrow WHERE day = $1", bad.Start).Scan(&n); err != nil || n != 0 {
		t.Errorf("the failed partition holds %d rows (%v)", n, err)
	}
	if n := count(t, d.DB(), "narrow"); n != 4 {
		t.Errorf("the table holds %d rows; want the 4 partitions' one each", n)
	}
}
