package main

import (
	"fmt"
	"html"
	"strconv"
	"strings"
)

// The ANSI-to-HTML conversion that renders the terminal grid for its
// screenshot: text with SGR escapes (ESC [ … m) becomes spans coloured as
// a terminal of the xterm palette colours them. Other escapes are
// dropped.

// palette is xterm's 16 colours.
var palette = [16]string{
	"#000000", "#cd3131", "#0dbc79", "#e5e510", "#2472c8", "#bc3fbc", "#11a8cd", "#e5e5e5",
	"#666666", "#f14c4c", "#23d18b", "#f5f543", "#3b8eea", "#d670d6", "#29b8db", "#ffffff",
}

// color256 returns the colour of index n of the 256-colour palette.
func color256(n int) string {
	switch {
	case n < 16:
		return palette[n]
	case n < 232:
		n -= 16
		level := func(v int) int {
			if v == 0 {
				return 0
			}
			return 55 + v*40
		}
		return fmt.Sprintf("#%02x%02x%02x", level(n/36), level(n/6%6), level(n%6))
	}
	g := 8 + (n-232)*10
	return fmt.Sprintf("#%02x%02x%02x", g, g, g)
}

// sgr is the state the SGR codes set.
type sgr struct {
	fg, bg           string
	bold, dim, under bool
	inverse          bool
}

func (s sgr) style() string {
	fg, bg := s.fg, s.bg
	if s.inverse {
		fg, bg = bg, fg
		if fg == "" {
			fg = "var(--bg)"
		}
		if bg == "" {
			bg = "var(--fg)"
		}
	}
	var b []string
	if fg != "" {
		b = append(b, "color:"+fg)
	}
	if bg != "" {
		b = append(b, "background:"+bg)
	}
	if s.bold {
		b = append(b, "font-weight:bold")
	}
	if s.dim {
		b = append(b, "opacity:.6")
	}
	if s.under {
		b = append(b, "text-decoration:underline")
	}
	return strings.Join(b, ";")
}

// apply sets the state from the parameters of one SGR escape.
func (s *sgr) apply(params string) {
	if params == "" {
		*s = sgr{}
		return
	}
	codes := strings.Split(params, ";")
	for i := 0; i < len(codes); i++ {
		n, err := strconv.Atoi(codes[i])
		if err != nil {
			continue
		}
		switch {
		case n == 0:
			*s = sgr{}
		case n == 1:
			s.bold = true
		case n == 2:
			s.dim = true
		case n == 4:
			s.under = true
		case n == 7:
			s.inverse = true
		case n == 22:
			s.bold, s.dim = false, false
		case n == 24:
			s.under = false
		case n == 27:
			s.inverse = false
		case 30 <= n && n <= 37:
			s.fg = palette[n-30]
		case 90 <= n && n <= 97:
			s.fg = palette[n-90+8]
		case 40 <= n && n <= 47:
			s.bg = palette[n-40]
		case 100 <= n && n <= 107:
			s.bg = palette[n-100+8]
		case n == 39:
			s.fg = ""
		case n == 49:
			s.bg = ""
		case n == 38 || n == 48:
			var c string
			switch {
			case i+2 < len(codes) && codes[i+1] == "5":
				if v, err := strconv.Atoi(codes[i+2]); err == nil && 0 <= v && v < 256 {
					c = color256(v)
				}
				i += 2
			case i+4 < len(codes) && codes[i+1] == "2":
				r, e1 := strconv.Atoi(codes[i+2])
				g, e2 := strconv.Atoi(codes[i+3])
				bl, e3 := strconv.Atoi(codes[i+4])
				if e1 == nil && e2 == nil && e3 == nil && r|g|bl >= 0 && r < 256 && g < 256 && bl < 256 {
					c = fmt.Sprintf("#%02x%02x%02x", r, g, bl)
				}
				i += 4
			default:
				i = len(codes) // malformed: ignore the rest
			}
			if c != "" {
				if n == 38 {
					s.fg = c
				} else {
					s.bg = c
				}
			}
		}
	}
}

// ansiToHTML returns the HTML of text holding ANSI escapes: the text
// escaped, in spans styled by the SGR codes.
func ansiToHTML(text string) string {
	var b strings.Builder
	var cur sgr
	open := false
	flush := func(s string) {
		if s == "" {
			return
		}
		if st := cur.style(); st != "" && !open {
			b.WriteString(`<span style="` + st + `">`)
			open = true
		}
		b.WriteString(html.EscapeString(s))
	}
	for len(text) > 0 {
		i := strings.IndexByte(text, 0x1b)
		if i < 0 {
			flush(text)
			break
		}
		flush(text[:i])
		text = text[i+1:]
		if !strings.HasPrefix(text, "[") {
			continue // a lone ESC or another kind of escape: dropped
		}
		// CSI: parameters and intermediates up to a final byte in @–~.
		j := 1
		for j < len(text) && (text[j] < 0x40 || text[j] > 0x7e) {
			j++
		}
		if j == len(text) {
			break // unterminated
		}
		if text[j] == 'm' {
			if open {
				b.WriteString("</span>")
				open = false
			}
			cur.apply(text[1:j])
		}
		text = text[j+1:]
	}
	if open {
		b.WriteString("</span>")
	}
	return b.String()
}

// terminalPage is a page that shows html as a dark terminal does.
func terminalPage(body string) string {
	return `<!doctype html><html><head><meta charset="utf-8"><style>
:root { --fg: #d4d4d4; --bg: #1e1e1e; }
body { margin: 0; background: #3c3c3c; font-family: system-ui, sans-serif; }
.window { margin: 16px; display: inline-block; border-radius: 8px; overflow: hidden; box-shadow: 0 6px 24px rgba(0,0,0,.5); }
.bar { background: #2d2d2d; color: #9d9d9d; font-size: 12px; padding: 6px 12px; }
pre { margin: 0; padding: 12px 16px; background: var(--bg); color: var(--fg); font: 14px/1.35 "DejaVu Sans Mono", monospace; }
</style></head><body><div class="window"><div class="bar">tranche status</div><pre id="term">` + body + `</pre></div></body></html>`
}
