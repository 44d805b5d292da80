package sqldest

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"

	"github.com/tranche-dev/tranche"
	"github.com/tranche-dev/tranche/destination"
	"github.com/tranche-dev/tranche/destination/column"
	"github.com/tranche-dev/tranche/internal/wait"
	"github.com/tranche-dev/tranche/ledger/sqlledger"
)

// Options configure [New].
type Options struct {
	// Dialect is the database's dialect, such as [SQLite]; required.
	Dialect *Dialect

	// Name names the destination in events and errors, such as
	// "sqlite /var/lib/warehouse.db"; required.
	Name string

	// Ledger, when not nil, is the ledger whose database the
	// destination writes to, and whose transactions it shares: a batch
	// with a fencing token commits in the transaction that records its
	// partition's success ([sqlledger.Ledger.Defer]). The database given
	// to New must then be nil, or the ledger's own.
	Ledger *sqlledger.Ledger
}

// Destination is a [tranche.Destination] that replaces each batch's
// partition in a table of a SQL database, with the fencing check, in one
// transaction; see the package documentation for what it guarantees. It
// is safe for concurrent use.
type Destination struct {
	db      *sql.DB
	dialect *Dialect
	name    string
	ledger  *sqlledger.Ledger
	key     string // its key for the ledger's deferred work, with the asset

	tables  []*table
	byAsset map[string][]*table

	qToken                                 string
	qReadToken, qUpdateToken, qInsertToken string

	// stripes serialize, under a dialect with SelectToken (optimistic
	// transactions: DuckDB), this destination's writes of the same
	// partitions, which would otherwise conflict, be tried again, and
	// fail once the tries ran out under a crowd of concurrent writers:
	// a write holds the stripe of each of its partitions (by table and
	// start), taken in ascending order.
	stripes [numStripes]sync.Mutex
}

// numStripes is how many stripes a destination's partitions share.
const numStripes = 64

// lockPartitions takes the stripes of the partitions of writes, and
// returns what releases them.
func (d *Destination) lockPartitions(writes []write) (unlock func()) {
	var held [numStripes]bool
	for _, w := range writes {
		h := fnv.New32a()
		h.Write([]byte(w.table.name))
		held[(h.Sum32()^uint32(w.start)^uint32(w.start>>32))%uint32(len(held))] = true
	}
	for i, ok := range held {
		if ok {
			d.stripes[i].Lock()
		}
	}
	return func() {
		for i, ok := range held {
			if ok {
				d.stripes[i].Unlock()
			}
		}
	}
}

var _ tranche.Destination = (*Destination)(nil)

// TokenTable is the table in which a destination keeps the token of each
// partition's last write, in the database's current schema:
//
//	CREATE TABLE tranche_tokens (
//		table_name TEXT NOT NULL,   -- the table, qualified as the Table names it
//		start_s    BIGINT NOT NULL, -- the partition's start, Unix seconds (0: unpartitioned)
//		token      BIGINT NOT NULL, -- the token of its last fenced write
//		run_id     TEXT NOT NULL,   -- that write's run
//		dag        TEXT NOT NULL,   -- and the identity of its DAG
//		PRIMARY KEY (table_name, start_s)
//	)
const TokenTable = "tranche_tokens"

const createTokens = `CREATE TABLE IF NOT EXISTS tranche_tokens (
	table_name TEXT NOT NULL,
	start_s    BIGINT NOT NULL,
	token      BIGINT NOT NULL,
	run_id     TEXT NOT NULL,
	dag        TEXT NOT NULL,
	PRIMARY KEY (table_name, start_s)
)`

// qToken locks a partition's row of the token table, inserting an empty
// fence where it has none, and returns the fence it holds, so that
// writers of one partition take turns and the fencing rule
// (destination.Fence.Admit, in Go, the one every destination applies)
// judges the write on what the row held; qUpdateToken then records the
// fence the write leaves.
const qToken = `INSERT INTO tranche_tokens (table_name, start_s, token, run_id, dag) VALUES ($1, $2, 0, '', '')
	ON CONFLICT (table_name, start_s) DO UPDATE SET token = tranche_tokens.token
	RETURNING token, run_id, dag`

// The statements of the token check of a dialect with SelectToken: the
// partition's row read, then updated, or inserted where it is missing.
const (
	qReadToken   = `SELECT token, run_id, dag FROM tranche_tokens WHERE table_name = $1 AND start_s = $2`
	qUpdateToken = `UPDATE tranche_tokens SET token = $1, run_id = $2, dag = $3 WHERE table_name = $4 AND start_s = $5`
	qInsertToken = `INSERT INTO tranche_tokens (table_name, start_s, token, run_id, dag) VALUES ($1, $2, $3, $4, $5)`
)

// New returns a destination writing into db's tables. It checks the
// table specs, all at once, and creates the token table if it does not
// exist; the tables themselves must exist when the first batch is
// written ([Destination.CreateTables] creates them). The caller keeps db
// and closes it after the destination's last use.
func New(ctx context.Context, db *sql.DB, opts Options, tables ...Table) (*Destination, error) {
	switch {
	case opts.Dialect == nil || opts.Name == "":
		return nil, errors.New("tranche: sqldest.New needs a dialect and a name")
	case opts.Ledger != nil && db != nil && db != opts.Ledger.DB():
		return nil, fmt.Errorf("tranche: %s: the database is not the ledger's; give nil, or the ledger's own, to share its transactions", opts.Name)
	case opts.Ledger != nil:
		db = opts.Ledger.DB()
	case db == nil:
		return nil, fmt.Errorf("tranche: %s: no database", opts.Name)
	}
	if len(tables) == 0 {
		return nil, fmt.Errorf("tranche: %s: no tables", opts.Name)
	}
	d := &Destination{db: db, dialect: opts.Dialect, name: opts.Name, ledger: opts.Ledger, byAsset: map[string][]*table{}}
	d.key = fmt.Sprintf("destination %s (%p)", d.name, d)
	var errs []error
	seen := map[string]bool{}
	for _, t := range tables {
		c, err := compile(t)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if seen[c.name] {
			errs = append(errs, fmt.Errorf("table %s given twice", c.name))
			continue
		}
		seen[c.name] = true
		d.tables = append(d.tables, c)
		d.byAsset[c.Asset] = append(d.byAsset[c.Asset], c)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("tranche: %s: %w", d.name, errors.Join(errs...))
	}
	d.qToken = d.dialect.rebind(qToken)
	d.qReadToken, d.qUpdateToken, d.qInsertToken = d.dialect.rebind(qReadToken), d.dialect.rebind(qUpdateToken), d.dialect.rebind(qInsertToken)
	for _, c := range d.tables {
		c.qInsert, c.qDelete = d.dialect.rebind(c.qInsert), d.dialect.rebind(c.qDelete)
	}
	if err := d.createTables(ctx, nil); err != nil {
		return nil, err
	}
	return d, nil
}

// String returns the destination's name, as events give it.
func (d *Destination) String() string { return d.name }

// Shared reports whether the destination shares a ledger's transactions.
func (d *Destination) Shared() bool { return d.ledger != nil }

// CreateTables creates the destination's tables, and an index on each
// partition column, where they do not exist, in one transaction (see
// [Table.DDL] for the statements).
func (d *Destination) CreateTables(ctx context.Context) error {
	return d.createTables(ctx, d.tables)
}

// createTables creates the token table and the given tables if missing.
func (d *Destination) createTables(ctx context.Context, tables []*table) error {
	op := "creating the token table"
	if len(tables) > 0 {
		op = "creating the tables"
	} else if d.dialect.HasTable != "" {
		// Read first, outside any transaction: the transaction below
		// takes SQLite's write lock (PostgreSQL's advisory lock), which
		// a worker paused in a write may hold for as long as it is
		// stopped, and a destination whose table exists must open
		// without waiting for it.
		var exists bool
		if err := d.db.QueryRowContext(ctx, d.dialect.rebind(d.dialect.HasTable), TokenTable).Scan(&exists); err == nil && exists {
			return nil
		}
	}
	return d.retry(ctx, op, func() error {
		tx, err := d.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if d.dialect.LockSchema != "" {
			if _, err := tx.ExecContext(ctx, d.dialect.LockSchema); err != nil {
				return err
			}
		}
		exists := false
		if d.dialect.HasTable != "" {
			if err := tx.QueryRowContext(ctx, d.dialect.rebind(d.dialect.HasTable), TokenTable).Scan(&exists); err != nil {
				return err
			}
		}
		if !exists {
			if _, err := tx.ExecContext(ctx, createTokens+d.dialect.TableOptions); err != nil {
				return err
			}
		}
		for _, c := range tables {
			stmts, err := c.Table.DDL(d.dialect)
			if err != nil {
				return err
			}
			for _, s := range stmts {
				if _, err := tx.ExecContext(ctx, s); err != nil {
					return fmt.Errorf("table %s: %w", c.name, err)
				}
			}
		}
		return tx.Commit()
	})
}

// write is one batch for one table, checked and converted: what it
// needs of the batch is copied, since a write handed to the ledger runs
// after Write has returned the batch to the runner.
type write struct {
	table     *table
	index     int // the batch's in the Write
	partition tranche.TimePartition
	key       string // the partition's key; "" unpartitioned
	run       string
	dag       string // the DAG identity the token counts in
	token     int64
	start     int64 // the partition's start, Unix seconds; 0 unpartitioned
	rows      *Rows
}

// batch is what the fencing rule reads of the write's batch.
func (w *write) batch() tranche.Batch {
	return tranche.Batch{Asset: w.table.Asset, Partition: w.partition, RunID: w.run, DAG: w.dag, Token: w.token}
}

// Write implements [tranche.Destination]. A value of a row that its
// table's spec does not take refuses the write with a [*column.ValueError], and
// nothing of the write is written. For a destination sharing a ledger
// and batches with a fencing token, it checks and converts every value
// at once, then hands the writes to the ledger, which commits them with
// the partitions' success. Otherwise it writes them in one transaction
// of its own: for each partition and table, the token check (a write
// older than the partition's last fails with an error matching
// [tranche.ErrFenced]), the delete of the partition's rows, and the
// insert of the batch's, each value checked as it is inserted; a refused
// one rolls the transaction back.
func (d *Destination) Write(ctx context.Context, batches []tranche.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	deferred := d.ledger != nil && len(batches) > 0 && batches[0].Token != 0
	writes, err := d.check(batches, deferred)
	if err != nil {
		return err
	}
	if len(writes) == 0 {
		return nil
	}
	if deferred {
		return d.deferWrites(batches, writes)
	}
	// Partitions in one order, so that concurrent writers of several
	// never wait for each other in a circle.
	slices.SortStableFunc(writes, func(a, b write) int {
		return cmp.Or(cmp.Compare(a.table.name, b.table.name), cmp.Compare(a.start, b.start))
	})
	if d.dialect.SelectToken {
		defer d.lockPartitions(writes)()
	}
	return d.retry(ctx, "writing "+describeWrites(writes), func() error {
		conn, err := d.db.Conn(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		for i := range writes {
			if err := d.apply(ctx, conn, tx, &writes[i]); err != nil {
				_ = tx.Rollback()
				return err
			}
		}
		return tx.Commit()
	})
}

// check checks every batch against the tables of its asset, and returns
// a write for each; convert checks and converts the rows too, for writes
// that run after Write has returned, which would otherwise read them as
// they insert them.
func (d *Destination) check(batches []tranche.Batch, convert bool) ([]write, error) {
	var writes []write
	fenced := len(batches) > 0 && batches[0].Token != 0
	for k := range batches {
		b := &batches[k]
		if (b.Token != 0) != fenced {
			return nil, fmt.Errorf("tranche: %s: asset %q: batches with and without fencing tokens in one write", d.name, b.Asset)
		}
		tables := d.byAsset[b.Asset]
		if len(tables) == 0 {
			return nil, fmt.Errorf("%w: %s has no table for asset %q; its tables take the assets %s",
				ErrNoTable, d.name, b.Asset, strings.Join(d.assets(), ", "))
		}
		for _, t := range tables {
			switch {
			case t.part < 0 && b.Column != "":
				return nil, fmt.Errorf("tranche: %s: table %s is unpartitioned (no Partition column), but asset %q is partitioned by %q",
					d.name, t.name, b.Asset, b.Column)
			case t.part >= 0 && b.Column == "":
				return nil, fmt.Errorf("tranche: %s: table %s is partitioned by column %q, but asset %q is unpartitioned",
					d.name, t.name, t.Partition, b.Asset)
			case t.part >= 0 && partitionKey(t) != b.Column:
				return nil, fmt.Errorf("tranche: %s: table %s's partition column %q reads the rows' key %q, but asset %q partitions by the key %q",
					d.name, t.name, t.Partition, partitionKey(t), b.Asset, b.Column)
			}
			rows := newRows(d, t, b)
			if convert {
				if err := rows.convert(); err != nil {
					return nil, err
				}
			}
			w := write{table: t, index: k, partition: b.Partition, key: b.Partition.Key(), run: b.RunID, dag: b.DAG, token: b.Token, rows: rows}
			if t.part >= 0 {
				w.start = b.Partition.Start.Unix()
			}
			writes = append(writes, w)
		}
	}
	return writes, nil
}

func partitionKey(t *table) string {
	if k := t.cols[t.part].Key; k != "" {
		return k
	}
	return t.cols[t.part].Name
}

func (d *Destination) assets() []string {
	var out []string
	for a := range d.byAsset {
		out = append(out, fmt.Sprintf("%q", a))
	}
	slices.Sort(out)
	return out
}

// deferWrites hands the writes to the ledger, one item per partition,
// under the destination's key and the asset, so that an asset's retry
// replaces its earlier write.
func (d *Destination) deferWrites(batches []tranche.Batch, writes []write) error {
	items := make([]sqlledger.Deferred, 0, len(batches))
	for k := range batches {
		b := &batches[k]
		var mine []write
		for _, w := range writes {
			if w.index == k {
				mine = append(mine, w)
			}
		}
		items = append(items, sqlledger.Deferred{RunID: b.RunID, Start: b.Partition.Start, Token: b.Token,
			Work: func(ctx context.Context, conn *sql.Conn, tx *sql.Tx) error {
				for i := range mine {
					if err := d.apply(ctx, conn, tx, &mine[i]); err != nil {
						return d.wrap(ctx, "writing "+describeWrites(mine[i:i+1]), err)
					}
				}
				return nil
			}})
	}
	return d.ledger.Defer(fmt.Sprintf("%s, asset %q", d.key, batches[0].Asset), items)
}

// apply writes one batch into one table in tx: the token check, the
// delete of the partition's rows (unless the table appends), the insert.
func (d *Destination) apply(ctx context.Context, conn *sql.Conn, tx *sql.Tx, w *write) error {
	t := w.table
	if err := d.fence(ctx, tx, w); err != nil {
		return err
	}
	if !t.Append {
		var args []any
		switch {
		case t.part < 0:
		case t.cols[t.part].Type == column.Time:
			args = []any{d.dialect.timeValue(w.partition.Start), d.dialect.timeValue(w.partition.End)}
		default:
			args = []any{w.key}
		}
		if _, err := tx.ExecContext(ctx, t.qDelete, args...); err != nil {
			return err
		}
	}
	if w.rows.Len() == 0 {
		return nil
	}
	if d.dialect.Insert != nil {
		err := d.dialect.Insert(ctx, conn, tx, [2]string{t.Schema, t.Name}, t.columnNames, w.rows)
		if ve, ok := errors.AsType[*column.ValueError](err); ok {
			ve.Destination, ve.Table, ve.Asset, ve.Partition = d.name, t.name, t.Asset, w.key
			return ve
		}
		return err
	}
	return d.insert(ctx, tx, t, w.rows)
}

// fence is the token check of a write, atomic with it: the partition's
// row of the token table read and locked (qToken; under a dialect with
// SelectToken, a read, and an insert where the row is missing, whose
// conflict with a concurrent first write the dialect tries again), the
// write judged by destination.Fence.Admit, and the fence it leaves
// written back. Token 0 writes back what it read, which still makes a
// concurrent writer of the row conflict.
func (d *Destination) fence(ctx context.Context, tx *sql.Tx, w *write) error {
	t := w.table
	var stored int64
	var run, dag string
	var err error
	if d.dialect.SelectToken {
		err = tx.QueryRowContext(ctx, d.qReadToken, t.name, w.start).Scan(&stored, &run, &dag)
		if errors.Is(err, sql.ErrNoRows) {
			// A concurrent first write of the partition that committed
			// its row first fails the insert, or the commit, with a
			// duplicate key, which the dialect calls a conflict to try
			// again: the next try reads the row. Any other failure is
			// the write's.
			next, err := destination.Fence{}.Admit(w.batch())
			if err != nil {
				return &TokenError{Destination: d.name, Table: t.name, Partition: w.key, RunID: w.run, Token: w.token}
			}
			_, err = tx.ExecContext(ctx, d.qInsertToken, t.name, w.start, next.Token, w.run, next.DAG)
			return err
		}
	} else {
		err = tx.QueryRowContext(ctx, d.qToken, t.name, w.start).Scan(&stored, &run, &dag)
	}
	if err != nil {
		return err
	}
	held := destination.Fence{DAG: dag, Token: stored}
	next, err := held.Admit(w.batch())
	if err != nil {
		return &TokenError{Destination: d.name, Table: t.name, Partition: w.key, RunID: w.run, Token: w.token,
			StoredRunID: run, Stored: stored}
	}
	nextRun := run
	if w.token != 0 || run == "" {
		nextRun = w.run
	}
	if next == held && nextRun == run && !d.dialect.SelectToken {
		return nil // qToken locked the row already
	}
	_, err = tx.ExecContext(ctx, d.qUpdateToken, next.Token, nextRun, next.DAG, t.name, w.start)
	return err
}

// insert inserts rows with prepared INSERTs, the dialect's RowsPerInsert
// rows a statement, checking each row as it goes.
func (d *Destination) insert(ctx context.Context, tx *sql.Tx, t *table, rows *Rows) error {
	per := max(1, d.dialect.RowsPerInsert)
	var stmt *sql.Stmt
	defer func() {
		if stmt != nil {
			stmt.Close()
		}
	}()
	n := len(t.cols)
	args := make([]any, per*n)
	prepared := 0 // the rows of stmt's VALUES list
	for lo := 0; lo < rows.Len(); lo += per {
		k := min(rows.Len()-lo, per)
		for i := range k {
			if err := rows.Row(lo+i, args[i*n:(i+1)*n]); err != nil {
				return err
			}
		}
		if k != prepared {
			if stmt != nil {
				stmt.Close()
			}
			var err error
			if stmt, err = tx.PrepareContext(ctx, t.insertQuery(d.dialect, k)); err != nil {
				return err
			}
			prepared = k
		}
		if _, err := stmt.ExecContext(ctx, args[:k*n]...); err != nil {
			return err
		}
	}
	return nil
}

// TokenError refuses a write whose fencing token is older than the token
// of the last write of its partition: the write of an attempt that was
// taken over, arriving after the newer attempt's. It matches
// [tranche.ErrFenced]. Nothing was written.
type TokenError struct {
	Destination, Table, Partition string
	RunID                         string
	Token                         int64 // the refused write's
	StoredRunID                   string
	Stored                        int64 // the partition's last write's
}

func (e *TokenError) Error() string {
	s := fmt.Sprintf("tranche: %s: table %s, partition %s: the write of run %s at token %d is older than the partition's last, token %d of run %s: a newer attempt wrote it; nothing was written",
		e.Destination, e.Table, e.Partition, e.RunID, e.Token, e.Stored, e.StoredRunID)
	return s
}

func (e *TokenError) Unwrap() error { return tranche.ErrFenced }

func describeWrites(ws []write) string {
	if len(ws) == 1 {
		if k := ws[0].key; k != "" {
			return fmt.Sprintf("table %s, partition %s", ws[0].table.name, k)
		}
		return "table " + ws[0].table.name
	}
	return fmt.Sprintf("%d partitions of tables from %s", len(ws), ws[0].table.name)
}

// maxTries bounds how often a transaction is tried when the dialect calls
// its failure retryable.
const maxTries = 8

// retry runs f, trying it again while the dialect calls its failure a
// transient conflict, and wraps its last failure.
func (d *Destination) retry(ctx context.Context, op string, f func() error) error {
	transient := func(err error) bool { _, _, again := d.dialect.classify(err); return again }
	return d.wrap(ctx, op, wait.Retry(ctx, maxTries, transient, f))
}

// wrap turns a failure of op into an [*sqlledger.Error], leaving alone the
// destination's own errors and the context's.
func (d *Destination) wrap(ctx context.Context, op string, err error) error {
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil && !errors.Is(err, ctx.Err()):
		return fmt.Errorf("tranche: %s: %s: %w (%w)", d.name, op, ctx.Err(), err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	if _, ok := errors.AsType[*TokenError](err); ok {
		return err
	}
	if _, ok := errors.AsType[*column.ValueError](err); ok {
		return err
	}
	if _, ok := errors.AsType[*sqlledger.Error](err); ok {
		return err
	}
	class, hint, _ := d.dialect.classify(err)
	if msg := err.Error(); hint == "" && (strings.Contains(msg, "no such table") ||
		strings.Contains(msg, "relation") && strings.Contains(msg, "does not exist")) {
		hint = "a table is missing: create the tables first (Destination.CreateTables, or the statements of Table.DDL)"
	}
	return &sqlledger.Error{Name: d.name, Op: op, Class: class, Hint: hint, Err: err}
}
