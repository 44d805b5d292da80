package address_test

import (
	"errors"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/tranche-dev/tranche/ledger/address"
)

// TestParse reads every form of address the README, the command's
// documentation and the examples show, and the refusals beside them.
func TestParse(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want address.Address
		str  string // String(); "" for in
	}{
		// The README's.
		{in: "sqlite:tranche-demo/address.db", want: address.Address{Scheme: "sqlite", Path: "tranche-demo/address.db"}},
		{in: "sqlite:///abs/path", want: address.Address{Scheme: "sqlite", Path: "/abs/path"}, str: "sqlite:/abs/path"},
		{in: "sqlite:PATH", want: address.Address{Scheme: "sqlite", Path: "PATH"}},
		{in: "postgres://user@host:5432/db?schema=NAME", want: address.Address{Scheme: "postgres", Conn: "postgres://user@host:5432/db", Schema: "NAME"}},
		{in: "postgres://user:password@host:5432/database?sslmode=require", want: address.Address{Scheme: "postgres", Conn: "postgres://user:password@host:5432/database?sslmode=require"},
			str: "postgres://user:xxxxx@host:5432/database?sslmode=require"},
		// The command's documentation and the examples'.
		{in: "sqlite:tranche.db", want: address.Address{Scheme: "sqlite", Path: "tranche.db"}},
		{in: "sqlite:events.db", want: address.Address{Scheme: "sqlite", Path: "events.db"}},
		{in: "sqlite:///var/lib/tranche.db", want: address.Address{Scheme: "sqlite", Path: "/var/lib/tranche.db"}, str: "sqlite:/var/lib/tranche.db"},
		{in: "postgres://user@host:5432/warehouse", want: address.Address{Scheme: "postgres", Conn: "postgres://user@host:5432/warehouse"}},
		// Other forms.
		{in: "SQLITE:address.db", want: address.Address{Scheme: "sqlite", Path: "address.db"}, str: "sqlite:address.db"},
		{in: "sqlite:./address.db", want: address.Address{Scheme: "sqlite", Path: "./address.db"}},
		{in: "sqlite:/abs/address.db", want: address.Address{Scheme: "sqlite", Path: "/abs/address.db"}},
		{in: "sqlite://localhost/abs/address.db", want: address.Address{Scheme: "sqlite", Path: "/abs/address.db"}, str: "sqlite:/abs/address.db"},
		{in: "sqlite:///a%20b.db", want: address.Address{Scheme: "sqlite", Path: "/a b.db"}, str: "sqlite:/a b.db"},
		{in: "postgresql://bob@db/x?sslmode=disable&schema=s1", want: address.Address{Scheme: "postgres", Conn: "postgresql://bob@db/x?sslmode=disable", Schema: "s1"}},
		{in: "postgres:host=db.internal port=5433 dbname=warehouse", want: address.Address{Scheme: "postgres", Conn: "host=db.internal port=5433 dbname=warehouse"}},
		{in: "postgres:host=/tmp dbname=x schema=ledger", want: address.Address{Scheme: "postgres", Conn: "host=/tmp dbname=x", Schema: "ledger"}},
		{in: "postgres: host = db  password=pw user=bob", want: address.Address{Scheme: "postgres", Conn: "host=db password=pw user=bob"},
			str: "postgres:host=db password=xxxxx user=bob"},
		{in: `postgres:host=db password='a \'b\' c' schema='my schema'`, want: address.Address{Scheme: "postgres", Conn: `host=db password='a \'b\' c'`, Schema: "my schema"},
			str: `postgres:host=db password=xxxxx schema='my schema'`},
	} {
		got, err := address.Parse(tt.in)
		if err != nil {
			t.Errorf("ParseAddress(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseAddress(%q) = %+v; want %+v", tt.in, got, tt.want)
		}
		str := tt.str
		if str == "" {
			str = tt.in
		}
		if got.String() != str {
			t.Errorf("ParseAddress(%q).String() = %q; want %q", tt.in, got.String(), str)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	const secret = "hunter2-secret"
	for _, tt := range []struct{ in, want string }{
		{"tranche.db", `"tranche.db" is not an address`},
		{"tranche.db", "did you mean sqlite:tranche.db?"},
		{"/var/lib/tranche.db", "did you mean sqlite:/var/lib/tranche.db?"},
		{`C:\tranche.db`, "did you mean sqlite:"},
		{"", "is not an address"},
		{"postgress://bob:" + secret + "@db/x", `unknown kind of ledger "postgress"`},
		{"sqlite:", `"sqlite:" has no path`},
		{"sqlite://", "has no path"},
		{"sqlite://db.example/x.db", `names host "db.example"`},
		{"sqlite:x.db?mode=ro", "takes no query"},
		{"sqlite:///x.db?mode=ro", "takes no user, query"},
		{"postgres://bob:" + secret + "@db:notaport/x", "not a valid URL"},
		{"postgres://bob:" + secret + "@db/x?schema=", "an empty schema"},
		{"postgres:host=db schema=", "an empty schema"},
		{"postgres:", "names no server"},
		{"postgres:host=db password='" + secret, "no closing quote"},
		{"postgres:hostdb", "is not key=value"},
	} {
		_, err := address.Parse(tt.in)
		switch {
		case err == nil:
			t.Errorf("ParseAddress(%q) took it", tt.in)
		case !errors.Is(err, address.ErrInvalid):
			t.Errorf("ParseAddress(%q): %v does not match ErrAddress", tt.in, err)
		case !strings.Contains(err.Error(), tt.want):
			t.Errorf("ParseAddress(%q): %v; want it to say %q", tt.in, err, tt.want)
		case strings.Contains(err.Error(), secret):
			t.Errorf("ParseAddress(%q): %v shows the password", tt.in, err)
		}
	}
}

func TestAccessString(t *testing.T) {
	for a, want := range map[address.Access]string{address.AccessRead: "read", address.AccessWrite: "write", address.AccessCreate: "create", 7: "Access(7)"} {
		if a.String() != want {
			t.Errorf("Access(%d).String() = %q; want %q", int(a), a.String(), want)
		}
	}
}

// passwordAt finds where a fuzzed address puts its password: a URL's
// userinfo, or a password parameter.
var passwordAt = regexp.MustCompile(`://[^:/?#@\s]*:%s@|(^|[?&\s:])password=%s`)

// FuzzParse checks that any text is refused or read without
// panicking, that what is read reads back the same from its String,
// and that neither a refusal nor String shows a PostgreSQL URL's
// password.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"sqlite:tranche.db", "sqlite:///abs/path", "sqlite://localhost/x", "postgres://u:p@h:5432/d?schema=s&sslmode=disable",
		"postgres:host=h dbname=d schema='a b'", `postgres:password='x\'y' host=h`, "tranche.db", "sqlite:x?y", "postgresql://[::1]:5432/x"} {
		f.Add(s, "")
	}
	f.Add("postgres://bob:%s@db.example:5432/warehouse?sslmode=disable", "hunter2-secret")
	f.Add("postgres:host=db password=%s dbname=x", "longpassword")
	f.Add("postgres://bob@db/x?password=%s&schema=s", "another-secret")
	f.Add("postgres:0= password=%s", "000000") // key 0's value reads back as 0=password=...
	f.Fuzz(func(t *testing.T, in, pass string) {
		// pass is a password only where the text puts one.
		if passwordAt.MatchString(in) {
			in = strings.Replace(in, "%s", url.PathEscape(pass), 1)
		} else {
			pass = ""
		}
		a, err := address.Parse(in)
		hidden := func(s string) bool {
			return len(pass) < 6 || strings.ContainsAny(pass, " '\\%") || strings.Contains(strings.Replace(in, url.PathEscape(pass), "", 1), pass) ||
				!strings.Contains(s, pass)
		}
		if err != nil {
			if !errors.Is(err, address.ErrInvalid) {
				t.Fatalf("ParseAddress(%q): %v does not match ErrAddress", in, err)
			}
			if !hidden(err.Error()) {
				t.Fatalf("ParseAddress(%q): %v shows the password", in, err)
			}
			return
		}
		if a.Scheme != address.SchemeSQLite && a.Scheme != address.SchemePostgres {
			t.Fatalf("ParseAddress(%q).Kind = %q", in, a.Scheme)
		}
		if !hidden(a.String()) {
			t.Fatalf("ParseAddress(%q).String() = %q shows the password", in, a.String())
		}
		if a.Scheme == address.SchemeSQLite {
			back, err := address.Parse(a.String())
			if err != nil || back != a {
				t.Fatalf("ParseAddress(%q) = %+v, whose String %q reads back as %+v, %v", in, a, a.String(), back, err)
			}
		}
		if a.Scheme == address.SchemePostgres && !strings.HasPrefix(a.Conn, "postgres") {
			// A key=value string reads back the same, its password
			// aside, which String masks.
			back, err := address.Parse("postgres:" + a.Conn)
			if err != nil || back.Conn != a.Conn {
				t.Fatalf("ParseAddress(%q).Conn = %q, which reads back as %+v, %v", in, a.Conn, back, err)
			}
		}
	})
}
