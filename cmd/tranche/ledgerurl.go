package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/tranche-dev/tranche/ledger"
	"github.com/tranche-dev/tranche/ledger/postgres"
	"github.com/tranche-dev/tranche/ledger/sqlite"
	"github.com/tranche-dev/tranche/sqlledger"
)

// ErrLedgerURL is matched, with errors.Is, by the errors of a ledger URL
// that names no ledger the command can open.
var ErrLedgerURL = errors.New("tranche: bad ledger URL")

// urlError is a refusal of a ledger URL: its message names the URL,
// password masked, and what would be accepted.
type urlError struct{ msg string }

func (e *urlError) Error() string        { return e.msg }
func (e *urlError) Is(target error) bool { return target == ErrLedgerURL }

const accepted = "want sqlite:PATH (such as sqlite:tranche.db or sqlite:///var/lib/tranche.db) or postgres://user@host:5432/database"

// openLedger opens the ledger raw names: sqlite:PATH of an existing file,
// or a postgres:// or postgresql:// URL. Every subcommand opens it with
// Options.Existing, even cancel and resume, which write rows: the command
// never creates a ledger's file, schema or tables, nor migrates an older
// ledger under the workers of the release that wrote it. The ledger it
// returns is an io.Closer, which tranchecli closes.
func openLedger(ctx context.Context, raw string) (ledger.Ledger, error) {
	scheme, rest, ok := strings.Cut(raw, ":")
	switch strings.ToLower(scheme) {
	case "sqlite":
		path, err := sqlitePath(raw, rest)
		if err != nil {
			return nil, err
		}
		l, err := sqlite.Open(ctx, path, &sqlite.Options{Existing: true})
		if err != nil {
			return nil, fmt.Errorf("ledger %s: %w%s", raw, err, advice(err, "the path"))
		}
		return l, nil
	case "postgres", "postgresql":
		conn, opts, err := postgresURL(raw)
		if err != nil {
			return nil, err
		}
		opts.Existing = true
		l, err := postgres.Open(ctx, conn, opts)
		if err != nil {
			// The ledger's errors name the server, never the password;
			// redact masks it in whatever the driver quoted.
			return nil, &redactedError{fmt.Sprintf("ledger %s: %s%s", redact(raw), redact(err.Error()), advice(err, "the database and the schema= parameter")), err}
		}
		return l, nil
	}
	if !ok || strings.ContainsAny(scheme, `/\.`) || len(scheme) == 1 {
		// A path, or a Windows drive letter.
		return nil, &urlError{fmt.Sprintf("ledger %q is not a URL; %s (did you mean sqlite:%s?)", redact(raw), accepted, redact(raw))}
	}
	return nil, &urlError{fmt.Sprintf("ledger %q: unknown kind of ledger %q; %s", redact(raw), scheme, accepted)}
}

// advice says what to do about a ledger the command refused to open
// because it would have had to create or migrate it; check is what in
// the URL to check ("the path"). It returns "" for any other failure,
// whose message says what to do already.
func advice(err error, check string) string {
	if errors.Is(err, sqlledger.ErrNoLedger) {
		return "; the command opens existing ledgers only and creates none: check " + check + ", or create the ledger by running a worker (a program running a backfill) on it"
	}
	if se, ok := errors.AsType[*sqlledger.SchemaError](err); ok && se.Found < se.Known {
		return fmt.Sprintf("; the command migrates no ledger: upgrade it by running a worker built with this release of tranche (schema version %d) on it, or use the tranche command of the release that wrote it", se.Known)
	}
	return ""
}

// redactedError is a failure of the PostgreSQL ledger whose message has
// its passwords masked; it still matches the ledger's error with
// errors.Is and errors.As.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// sqlitePath returns the file of a sqlite: URL, which must exist: the
// command reads ledgers and never creates one.
func sqlitePath(raw, rest string) (string, error) {
	path := rest
	if strings.HasPrefix(rest, "//") {
		u, err := url.Parse(raw)
		switch {
		case err != nil:
			return "", &urlError{fmt.Sprintf("ledger %q: %v; %s", raw, err, accepted)}
		case u.Host != "" && u.Host != "localhost":
			return "", &urlError{fmt.Sprintf("ledger %q names host %q; a SQLite ledger is a local file: sqlite:///abs/path or sqlite:PATH", raw, u.Host)}
		case u.RawQuery != "" || u.Fragment != "":
			return "", &urlError{fmt.Sprintf("ledger %q: a SQLite ledger URL takes no query or fragment; give sqlite:PATH", raw)}
		}
		path = u.Path
	} else if strings.ContainsAny(rest, "?#") {
		return "", &urlError{fmt.Sprintf("ledger %q: a SQLite ledger URL takes no query or fragment; give sqlite:PATH", raw)}
	}
	if path == "" {
		return "", &urlError{fmt.Sprintf("ledger %q has no path; %s", raw, accepted)}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("ledger %q: %w", raw, err)
	}
	switch info, err := os.Stat(abs); {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("ledger %s: no such file %s; the command opens existing ledgers only (a program running a backfill creates its ledger): %w", raw, abs, err)
	case err != nil:
		return "", fmt.Errorf("ledger %s: %w", raw, err)
	case info.IsDir():
		return "", fmt.Errorf("ledger %s: %s is a folder; give the ledger's file, such as sqlite:%s", raw, abs, filepath.Join(path, "tranche.db"))
	}
	return abs, nil
}

// postgresURL splits tranche's own parameter schema=NAME from a
// PostgreSQL URL, which pgx would send to the server as a setting.
func postgresURL(raw string) (string, *postgres.Options, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", nil, &urlError{fmt.Sprintf("ledger %q is not a valid URL: %v; %s", redact(raw), redact(errors.Unwrap(err).Error()), accepted)}
	}
	q := u.Query()
	if !q.Has("schema") {
		return raw, &postgres.Options{}, nil
	}
	opts := &postgres.Options{Schema: q.Get("schema")}
	if opts.Schema == "" {
		return "", nil, &urlError{fmt.Sprintf("ledger %q: an empty schema; give schema=NAME or leave it out for the connection's own", redact(raw))}
	}
	q.Del("schema")
	u.RawQuery = q.Encode()
	return u.String(), opts, nil
}

var (
	// userinfo's password: scheme://user:PASSWORD@host
	userPassword = regexp.MustCompile(`(://[^:/?#@\s]*:)[^@\s]*@`)
	// a password parameter of a URL or a key=value string
	passwordParam = regexp.MustCompile(`(?i)((?:^|[?&\s])(?:ssl)?password=)('[^']*'|[^&\s]*)`)
)

// redact masks the passwords in s: a URL's, as url.URL.Redacted masks
// it, and the value of any password parameter, which Redacted leaves.
func redact(s string) string {
	s = userPassword.ReplaceAllString(s, "${1}xxxxx@")
	return passwordParam.ReplaceAllString(s, "${1}xxxxx")
}
