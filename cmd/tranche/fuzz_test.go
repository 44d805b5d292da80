package main

import (
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/tranche-dev/tranche/ledger/address"
)

// FuzzLedgerURL checks that no refusal of a PostgreSQL ledger URL, nor
// its redacted form, holds its password, and that any text given as a
// ledger URL is refused or taken without panicking (without dialing:
// only the parsing before a connection runs).
func FuzzLedgerURL(f *testing.F) {
	f.Add("bob", "hunter2-secret", "db.example:5432", "warehouse", "sslmode=disable")
	f.Add("a:b", "p@ss:w/rd?#", "127.0.0.1:notaport", "x", "schema=")
	f.Add("", "longpassword", "[::1]:5432", "", "password=another")
	f.Add("", "000 000", "h", "d", "schema=000+000")   // a password the query spells decoded
	f.Add("  ", "000 000", "0", "0", "%0X0000000+000") // a password the query spells escaped, which does not decode
	f.Fuzz(func(t *testing.T, user, pass, host, db, query string) {
		u := url.URL{Scheme: "postgres", User: url.UserPassword(user, pass), Host: host, Path: "/" + db, RawQuery: query}
		raw := u.String()
		// What a refusal may show of the URL without showing the
		// password: its other parts, and the URL masked, quoted as %q
		// quotes it (whose escapes, "\x10", can spell the password's
		// digits beside the query's).
		masked := u
		masked.User = url.UserPassword(user, "xxxxx")
		// The query's values are shown decoded too ("+" is a space).
		decoded, _ := url.QueryUnescape(query)
		shown := "postgres://xxxxx@/?&=" + user + host + db + query + decoded + url.QueryEscape(user) + url.PathEscape(db) + strconv.Quote(masked.String())
		hidden := func(s string) bool {
			return len(pass) < 6 || strings.Contains(shown, pass) || strings.Contains(shown, url.QueryEscape(pass)) ||
				!strings.Contains(s, pass) && !strings.Contains(s, url.QueryEscape(pass)) && !strings.Contains(s, (&url.URL{User: url.UserPassword("", pass)}).String()[3:])
		}
		if r := address.Redact(raw); !hidden(r) {
			t.Fatalf("Redact(%q) = %q holds the password %q", raw, r, pass)
		}
		a, err := address.Parse(raw)
		if err != nil && !hidden(err.Error()) {
			t.Fatalf("ParseAddress(%q): %v holds the password %q", raw, err, pass)
		}
		if err == nil && !hidden(a.String()) {
			t.Fatalf("ParseAddress(%q).String() = %q holds the password %q", raw, a, pass)
		}
		// Any text as a sqlite: address: a refusal or a path, never a panic.
		address.Parse("sqlite:" + query)
	})
}
