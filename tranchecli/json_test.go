package tranchecli_test

import (
	"bufio"
	"encoding/json"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// schemaField is one row of a table of docs/json.md.
type schemaField struct {
	typ      string // string, number, bool, [T] or {name}
	optional bool   // may be absent
	nullable bool   // may be null
}

var (
	schemaHeading = regexp.MustCompile("^### ([a-z_]+)$")
	schemaRow     = regexp.MustCompile("^\\| `([a-z_]+)` \\| `([^`]+)` \\|")
)

// readSchemas reads the object tables of docs/json.md.
func readSchemas(t *testing.T) map[string]map[string]schemaField {
	t.Helper()
	f, err := os.Open("../docs/json.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	schemas := map[string]map[string]schemaField{}
	var cur map[string]schemaField
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if m := schemaHeading.FindStringSubmatch(line); m != nil {
			cur = map[string]schemaField{}
			schemas[m[1]] = cur
			continue
		}
		if m := schemaRow.FindStringSubmatch(line); m != nil && cur != nil {
			typ := strings.ReplaceAll(m[2], `\|`, "|")
			var sf schemaField
			typ, sf.nullable = strings.CutSuffix(typ, "|null")
			typ, sf.optional = strings.CutSuffix(typ, "?")
			sf.typ = typ
			cur[m[1]] = sf
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"backfill", "status", "counts", "grid", "cell", "partition", "history", "attempt", "plan", "plan_counts", "plan_item"} {
		if len(schemas[name]) == 0 {
			t.Fatalf("docs/json.md has no table for %s", name)
		}
	}
	return schemas
}

// checkJSON checks that v, decoded JSON, has type typ of the schemas:
// each field of an object listed with its type, and each field the
// table does not mark optional present.
func checkJSON(t *testing.T, schemas map[string]map[string]schemaField, typ string, v any, path string) {
	t.Helper()
	switch {
	case typ == "string", typ == "number", typ == "bool":
		ok := false
		switch v.(type) {
		case string:
			ok = typ == "string"
		case float64:
			ok = typ == "number"
		case bool:
			ok = typ == "bool"
		}
		if !ok {
			t.Errorf("%s: %#v is not a %s", path, v, typ)
		}
	case strings.HasPrefix(typ, "["):
		arr, ok := v.([]any)
		if !ok {
			t.Errorf("%s: %#v is not an array", path, v)
			return
		}
		elem := typ[1 : len(typ)-1]
		if !strings.ContainsAny(elem[:1], "[{") && elem != "string" && elem != "number" && elem != "bool" {
			elem = "{" + elem + "}" // [cell] is an array of {cell}
		}
		for i, e := range arr {
			checkJSON(t, schemas, elem, e, path+"["+strconv.Itoa(i)+"]")
		}
	case strings.HasPrefix(typ, "{"):
		name := typ[1 : len(typ)-1]
		schema, ok := schemas[name]
		if !ok {
			t.Fatalf("%s: docs/json.md has no table %s", path, name)
		}
		obj, ok := v.(map[string]any)
		if !ok {
			t.Errorf("%s: %#v is not an object (%s)", path, v, name)
			return
		}
		for k, fv := range obj {
			sf, ok := schema[k]
			if !ok {
				t.Errorf("%s: field %q is not documented in the table %s of docs/json.md", path, k, name)
				continue
			}
			if fv == nil {
				if !sf.nullable {
					t.Errorf("%s.%s: null, which the table %s does not allow", path, k, name)
				}
				continue
			}
			checkJSON(t, schemas, sf.typ, fv, path+"."+k)
		}
		for k, sf := range schema {
			if _, ok := obj[k]; !ok && !sf.optional {
				t.Errorf("%s: field %q (table %s) is missing", path, k, name)
			}
		}
	default:
		t.Fatalf("%s: unknown type %q in docs/json.md", path, typ)
	}
}

// decodeAll decodes every JSON value of out, one after another.
func decodeAll(t *testing.T, out string) []any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	var vs []any
	for dec.More() {
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%v in:\n%s", err, out)
		}
		vs = append(vs, v)
	}
	return vs
}

// TestJSONSchema runs every read command with --format json, on a
// backfill with succeeded, failed, pending and running partitions and a
// cancellation, and checks the output against docs/json.md.
func TestJSONSchema(t *testing.T) {
	schemas := readSchemas(t)
	h := newHarness(t)
	h.faults.set("2026-01-06")
	h.must(1, append([]string{"run", "events", "--yes"}, week...)...) // stops after 2026-01-06: the rest pending
	id := h.only()
	h.must(0, "cancel", id)
	h.must(0, "run", "nightly", "--yes", "--slot", "2026-01-05T02:00:00Z", "--slot", "2026-01-07T02:00:00Z")

	for _, tc := range []struct {
		args []string
		typ  string
		n    int // values written
	}{
		{[]string{"ls", "--format", "json"}, "[{backfill}]", 1},
		{[]string{"status", id, "--format", "json"}, "{status}", 1},
		{[]string{"status", id, "--format", "json", "--partitions"}, "{status}", 1},
		{[]string{"history", id, "2026-01-06", "--format", "json"}, "{history}", 1},
		{[]string{"history", id, "2026-01-01", "--format", "json"}, "{history}", 1},
		{append([]string{"plan", "events", "--format", "json"}, week...), "{plan}", 1},
		{[]string{"plan", "nightly", "--format", "json", "--slot", "2026-01-05T02:00:00Z", "--slot", "2026-01-09T02:00:00Z"}, "{plan}", 1},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out := h.must(0, tc.args...)
			vs := decodeAll(t, out)
			if len(vs) != tc.n {
				t.Fatalf("%d JSON values, want %d:\n%s", len(vs), tc.n, out)
			}
			for _, v := range vs {
				checkJSON(t, schemas, tc.typ, v, "$")
			}
		})
	}

	t.Run("status --partitions streams", func(t *testing.T) {
		out := h.must(0, "status", id, "--format", "json", "--partitions")
		var s struct {
			Counts     map[string]int `json:"counts"`
			Partitions []struct {
				Key, State string
				Latest     *struct{ Number int }
			} `json:"partitions"`
		}
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatal(err)
		}
		if len(s.Partitions) != 7 || s.Partitions[0].Key != "2026-01-07" || s.Partitions[1].State != "failed" || s.Partitions[6].Latest != nil {
			t.Errorf("partitions: %+v", s.Partitions)
		}
		if want := map[string]int{"succeeded": 1, "failed": 1, "pending": 5, "running": 0, "canceled": 0}; !maps.Equal(s.Counts, want) {
			t.Errorf("counts %v, want %v", s.Counts, want)
		}
		// One partition a line, so that a reader can stream them too.
		if n := strings.Count(out, "\n"); n != 8 {
			t.Errorf("%d lines, want 8 (the head and each partition)", n)
		}
	})

	t.Run("status --watch", func(t *testing.T) {
		code, out, _ := h.run("status", id, "--watch", "--format", "json", "--interval", "5ms")
		if code != 1 {
			t.Errorf("watch of a canceled backfill: exit %d, want 1", code)
		}
		for _, v := range decodeAll(t, out) {
			checkJSON(t, schemas, "{status}", v, "$")
			if _, ok := v.(map[string]any)["grid"]; ok {
				t.Errorf("a watch line holds the grid")
			}
		}
	})

	t.Run("the package doc lists the same fields", func(t *testing.T) {
		src, err := os.ReadFile("doc.go")
		if err != nil {
			t.Fatal(err)
		}
		docRow := regexp.MustCompile(`(?m)^//\t([a-z_]+) +(string|number|bool|object|array) `)
		inDoc := map[string]bool{}
		for _, m := range docRow.FindAllStringSubmatch(string(src), -1) {
			inDoc[m[1]] = true
		}
		inMD := map[string]bool{}
		for name, schema := range schemas {
			if strings.HasPrefix(name, "plan") || name == "counts" || name == "asset_states" {
				continue // the plan is the backfill package's; counts and an asset's states are named in one line
			}
			for k := range schema {
				inMD[k] = true
			}
		}
		if a, b := slices.Sorted(maps.Keys(inDoc)), slices.Sorted(maps.Keys(inMD)); !slices.Equal(a, b) {
			t.Errorf("fields in doc.go:\n%v\nin docs/json.md:\n%v", a, b)
		}
	})
}
