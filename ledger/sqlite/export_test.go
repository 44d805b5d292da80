package sqlite

import "database/sql"

// Writer returns the ledger's writing pool, of one connection, so that a
// test can set a pragma on it (max_page_count, to fill the "disk").
func (l *Ledger) Writer() *sql.DB { return l.writer }
