package main

import (
	"strings"
	"testing"
)

func TestANSIToHTML(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"<b>&</b>", "&lt;b&gt;&amp;&lt;/b&gt;"},
		{"\x1b[32m#\x1b[0m .", `<span style="color:#0dbc79">#</span> .`},
		{"\x1b[1;31mX\x1b[m", `<span style="color:#cd3131;font-weight:bold">X</span>`},
		{"\x1b[91mX\x1b[39m", `<span style="color:#f14c4c">X</span>`},
		{"\x1b[38;5;196mX", `<span style="color:#ff0000">X</span>`},
		{"\x1b[38;5;244mX", `<span style="color:#808080">X</span>`},
		{"\x1b[48;2;1;2;3mX\x1b[0m", `<span style="background:#010203">X</span>`},
		{"\x1b[42m \x1b[49m|", `<span style="background:#0dbc79"> </span>|`},
		{"\x1b[2K\x1b[1Gline", "line"},           // other CSI escapes are dropped
		{"a\x1b]0;title\x07b", "a]0;title\x07b"}, // an OSC's ESC is dropped, its text kept
		{"\x1b[38;5mX", "X"},                     // malformed: ignored
		{"\x1b[3", ""},                           // unterminated
		{"\x1b[31m\x1b[0m", ""},                  // no text, no span
	}
	for _, tt := range tests {
		if got := ansiToHTML(tt.in); got != tt.want {
			t.Errorf("ansiToHTML(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzANSIToHTML checks that any input converts without panicking into
// HTML whose only tags are the converter's spans.
func FuzzANSIToHTML(f *testing.F) {
	for _, s := range []string{"\x1b[1;38;5;82mok\x1b[0m", "\x1b[38;2;300;1;1m<x>", "\x1b[", "<script>\x1b[31m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := ansiToHTML(s)
		rest := strings.ReplaceAll(out, "</span>", "")
		for {
			i := strings.Index(rest, `<span style="`)
			if i < 0 {
				break
			}
			j := strings.Index(rest[i:], `">`)
			if j < 0 {
				t.Fatalf("an unclosed span tag in %q", out)
			}
			if strings.ContainsAny(rest[i+len(`<span style="`):i+j], `<>"`) {
				t.Fatalf("a style with markup in %q", out)
			}
			rest = rest[:i] + rest[i+j+2:]
		}
		if strings.ContainsAny(rest, "<>") {
			t.Fatalf("ansiToHTML(%q) = %q holds markup beyond its spans", s, out)
		}
	})
}
