// Package address reads the addresses operators give ledgers
// (sqlite:PATH, postgres://…, postgres:KEY=VALUE…), the one parser of
// every program, and names what a program will do to the ledger it
// opens ([Access]), so that the ledger modules open it no more than
// that needs: sqlite.OpenLedger and postgres.OpenLedger are [OpenFunc]s,
// and reading a ledger never creates, migrates or writes it.
package address

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/tranche-dev/tranche/ledger"
)

// An Address names a ledger as an operator writes it, in $TRANCHE_LEDGER
// or a --ledger flag: sqlite:PATH, or a PostgreSQL URL
// (postgres://user@host:5432/database?schema=NAME) or key=value string
// (postgres:host=db dbname=warehouse schema=NAME). [Parse] reads
// one; the ledger modules open one (sqlite.OpenLedger,
// postgres.OpenLedger), so that this package, which every program
// imports, carries no driver.
type Address struct {
	// Scheme names the kind of ledger: "sqlite" or "postgres".
	Scheme string

	// Path is a SQLite ledger's file, as written: relative to the
	// working directory, or absolute.
	Path string

	// Conn is a PostgreSQL ledger's connection string as its driver
	// reads it, a URL or key=value pairs, without tranche's own
	// parameter schema.
	Conn string

	// Schema is a PostgreSQL ledger's schema, the schema= parameter; ""
	// means the connection's current schema.
	Schema string
}

// The schemes of [Address.Scheme].
const (
	SchemeSQLite   = "sqlite"
	SchemePostgres = "postgres"
)

// ErrInvalid is matched, with errors.Is, by the error of a ledger
// address that names no ledger: [Parse]'s, and an opener's given
// an address of a kind it does not open.
var ErrInvalid = errors.New("address: not a ledger's address")

// addressError is a refusal of an address; its message names the
// address, passwords masked, and what is accepted.
type addressError struct{ msg string }

func (e *addressError) Error() string        { return e.msg }
func (e *addressError) Is(target error) bool { return target == ErrInvalid }

func refuseAddress(format string, args ...any) error {
	return &addressError{fmt.Sprintf(format, args...)}
}

// Forms is what [Parse] accepts, as its refusals say it.
const Forms = "want sqlite:PATH (such as sqlite:tranche.db or sqlite:///var/lib/tranche.db), postgres://user@host:5432/database?schema=NAME, or postgres:host=HOST dbname=DATABASE"

// Parse reads a ledger's address:
//
//	sqlite:PATH                   a file, relative or absolute (sqlite:tranche.db)
//	sqlite:///abs/path            the same as a URL (sqlite://localhost/abs/path too)
//	postgres://user@host/db       a PostgreSQL URL as pgx and libpq read it (postgresql:// too)
//	postgres:host=db dbname=x     a PostgreSQL key=value string
//
// The kind is case-insensitive. A PostgreSQL address may carry one
// parameter of tranche's own, schema=NAME (a URL's query parameter, or a
// key of the key=value string), the schema holding the ledger's tables,
// which [Address.Schema] gets and [Address.Conn] leaves out. A SQLite
// address takes no query or fragment, and as a URL no host but
// localhost. Nothing is opened or checked on disk or on the network. Its
// errors match [ErrInvalid] and name the address with its passwords
// masked; a bare path is refused with the sqlite: address it may have
// meant.
func Parse(s string) (Address, error) {
	scheme, rest, ok := strings.Cut(s, ":")
	switch strings.ToLower(scheme) {
	case SchemeSQLite:
		path, err := sqlitePath(s, rest)
		if err != nil {
			return Address{}, err
		}
		return Address{Scheme: SchemeSQLite, Path: path}, nil
	case SchemePostgres, "postgresql":
		if strings.HasPrefix(rest, "//") {
			return postgresURL(s)
		}
		return postgresKeyValues(s, rest)
	}
	if !ok || strings.ContainsAny(scheme, `/\.`) || len(scheme) == 1 {
		// A path, or a Windows drive letter.
		return Address{}, refuseAddress("ledger %q is not an address; %s (did you mean sqlite:%s?)", Redact(s), Forms, Redact(s))
	}
	return Address{}, refuseAddress("ledger %q: unknown kind of ledger %q; %s", Redact(s), scheme, Forms)
}

// sqlitePath returns the file of a sqlite: address s, rest being what
// follows "sqlite:".
func sqlitePath(s, rest string) (string, error) {
	path := rest
	if strings.HasPrefix(rest, "//") {
		u, err := url.Parse(s)
		switch {
		case err != nil:
			return "", refuseAddress("ledger %q: %v; %s", s, errors.Unwrap(err), Forms)
		case u.Host != "" && u.Host != "localhost":
			return "", refuseAddress("ledger %q names host %q; a SQLite ledger is a local file: sqlite:///abs/path or sqlite:PATH", s, u.Host)
		case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery || u.User != nil:
			return "", refuseAddress("ledger %q: a SQLite ledger's address takes no user, query or fragment; give sqlite:PATH", s)
		}
		path = u.Path
	} else if strings.ContainsAny(rest, "?#") {
		return "", refuseAddress("ledger %q: a SQLite ledger's address takes no query or fragment; give sqlite:PATH", s)
	}
	if path == "" {
		return "", refuseAddress("ledger %q has no path; %s", s, Forms)
	}
	if strings.ContainsRune(path, 0) {
		return "", refuseAddress("ledger %q: the path holds a NUL byte", s)
	}
	return path, nil
}

// postgresURL reads a postgres:// or postgresql:// address, splitting
// tranche's parameter schema=NAME from the URL, which pgx would send to
// the server as a setting.
func postgresURL(s string) (Address, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Address{}, refuseAddress("ledger %q is not a valid URL: %s; %s", Redact(s), Redact(errors.Unwrap(err).Error()), Forms)
	}
	a := Address{Scheme: SchemePostgres, Conn: s}
	q := u.Query()
	if !q.Has("schema") {
		return a, nil
	}
	if a.Schema = q.Get("schema"); a.Schema == "" {
		return Address{}, refuseAddress("ledger %q: an empty schema; give schema=NAME or leave it out for the connection's own", Redact(s))
	}
	q.Del("schema")
	u.RawQuery = q.Encode()
	a.Conn = u.String()
	return a, nil
}

// postgresKeyValues reads a postgres: address holding a libpq key=value
// string (host=db port=5432 dbname=warehouse), taking out its schema key.
func postgresKeyValues(s, rest string) (Address, error) {
	pairs, err := splitKeyValues(rest)
	if err != nil {
		return Address{}, refuseAddress("ledger %q: %v; %s", Redact(s), err, Forms)
	}
	if len(pairs) == 0 {
		return Address{}, refuseAddress("ledger %q names no server; %s", Redact(s), Forms)
	}
	a := Address{Scheme: SchemePostgres}
	var kept []string
	for _, p := range pairs {
		if p[0] == "schema" {
			if p[1] == "" {
				return Address{}, refuseAddress("ledger %q: an empty schema; give schema=NAME or leave it out for the connection's own", Redact(s))
			}
			a.Schema = p[1]
			continue
		}
		kept = append(kept, p[0]+"="+quoteValue(p[1]))
	}
	a.Conn = strings.Join(kept, " ")
	return a, nil
}

// splitKeyValues splits a libpq connection string of key=value pairs,
// values bare or single-quoted with backslash escapes, as libpq and pgx
// read them.
func splitKeyValues(s string) ([][2]string, error) {
	var pairs [][2]string
	for {
		s = strings.TrimLeft(s, " \t\n\r\v\f")
		if s == "" {
			return pairs, nil
		}
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			return nil, fmt.Errorf("%q is not key=value", s)
		}
		key := strings.TrimRight(s[:eq], " \t\n\r\v\f")
		if key == "" || strings.ContainsAny(key, " \t\n\r\v\f'\\") {
			return nil, fmt.Errorf("%q is not a key", key)
		}
		s = strings.TrimLeft(s[eq+1:], " \t\n\r\v\f")
		var value strings.Builder
		if strings.HasPrefix(s, "'") {
			s = s[1:]
			for {
				if s == "" {
					return nil, fmt.Errorf("the value of %s has no closing quote", key)
				}
				c := s[0]
				s = s[1:]
				if c == '\'' {
					break
				}
				if c == '\\' {
					if s == "" {
						return nil, fmt.Errorf("the value of %s ends in a backslash", key)
					}
					c, s = s[0], s[1:]
				}
				value.WriteByte(c)
			}
		} else {
			for s != "" && !strings.ContainsRune(" \t\n\r\v\f", rune(s[0])) {
				c := s[0]
				s = s[1:]
				if c == '\\' && s != "" {
					c, s = s[0], s[1:]
				}
				value.WriteByte(c)
			}
		}
		pairs = append(pairs, [2]string{key, value.String()})
	}
}

// quoteValue writes a key=value string's value as libpq reads it back.
func quoteValue(v string) string {
	if v != "" && !strings.ContainsAny(v, " \t\n\r\v\f'\\") {
		return v
	}
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// String returns the address as [Parse] reads it, with its
// passwords masked: what errors and logs may show.
func (a Address) String() string {
	switch a.Scheme {
	case SchemeSQLite:
		if strings.HasPrefix(a.Path, "//") {
			return "sqlite://" + a.Path
		}
		return "sqlite:" + a.Path
	case SchemePostgres:
		if strings.HasPrefix(a.Conn, "postgres://") || strings.HasPrefix(a.Conn, "postgresql://") {
			s := a.Conn
			if a.Schema != "" {
				sep := "?"
				if strings.Contains(s, "?") {
					sep = "&"
				}
				s += sep + "schema=" + url.QueryEscape(a.Schema)
			}
			return Redact(s)
		}
		s := "postgres:" + a.Conn
		if a.Schema != "" {
			s += " schema=" + quoteValue(a.Schema)
		}
		return Redact(s)
	}
	return fmt.Sprintf("%s:%s", a.Scheme, Redact(a.Path+a.Conn))
}

var (
	// userinfo's password: scheme://user:PASSWORD@host
	userPassword = regexp.MustCompile(`(://[^:/?#@\s]*:)[^@\s]*@`)
	// a password parameter of a URL or a key=value string, or what reads
	// as one anywhere in a value ("0= password=x" is key 0's value
	// "password=x" to libpq, but masking it costs nothing)
	passwordParam = regexp.MustCompile(`(?i)((?:^|[^a-z0-9_])(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'?|[^&\s]*)`)
)

// Redact masks the passwords in s, an address or a message quoting one:
// a URL's, as url.URL.Redacted masks it, and the value of any password
// parameter, which Redacted leaves.
func Redact(s string) string {
	s = userPassword.ReplaceAllString(s, "${1}xxxxx@")
	return passwordParam.ReplaceAllString(s, "${1}xxxxx")
}

// Access is what a program opening a ledger by its [Address] will do to
// it, so that the opener opens it no more than that needs.
type Access int

const (
	// AccessRead reads the ledger only: the opener creates, migrates
	// and writes nothing, and refuses a ledger that is missing or at
	// another schema version. A read-only SQLite file, or a PostgreSQL
	// role allowed only SELECT, can be opened so.
	AccessRead Access = iota

	// AccessWrite amends an existing ledger at this release's schema
	// version (a cancel, a resume), creating and migrating nothing.
	AccessWrite

	// AccessCreate runs backfills: the opener creates the ledger if it
	// is missing and migrates an older one, as a worker's open does.
	AccessCreate
)

// String returns "read", "write" or "create".
func (a Access) String() string {
	switch a {
	case AccessRead:
		return "read"
	case AccessWrite:
		return "write"
	case AccessCreate:
		return "create"
	}
	return fmt.Sprintf("Access(%d)", int(a))
}

// An OpenFunc opens the ledger at an address for an access. For
// [AccessRead] it returns a reader alone, with no method that writes
// (sqlite.Reader, postgres.Reader); for [AccessWrite] and [AccessCreate]
// the reader is a [ledger.Ledger]. It is an io.Closer when it holds
// connections or files. sqlite.OpenLedger and postgres.OpenLedger are
// OpenFuncs; a program that links both chooses between them by
// [Address.Scheme].
type OpenFunc func(ctx context.Context, addr Address, access Access) (ledger.Reader, error)
