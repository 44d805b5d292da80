package cron

import "testing"

func TestCadence(t *testing.T) {
	tests := []struct {
		expr    string
		cadence Cadence
		days    string
	}{
		{"0 2 * * *", Daily, "* * *"},
		{"59 23 * * 1-5", Daily, "* * 1-5"},
		{"@daily", Daily, "* * *"},
		{"@weekly", Daily, "* * 0"},
		{"@monthly", Daily, "1 * *"},
		{"CRON_TZ=Europe/Berlin 30 4 1,15 JAN *", Daily, "1,15 1 *"},
		{"5 * * * *", Hourly, "* * *"},
		{"@hourly", Hourly, "* * *"},
		{"0 * * * SAT,SUN", Hourly, "* * 0,6"},
		{"0 */1 * * *", Hourly, "* * *"},
		{"0 0-23 * * *", Irregular, "* * *"}, // every wall hour, not every real one
		{"0 */2 * * *", Irregular, "* * *"},
		{"0 2,14 * * *", Irregular, "* * *"},
		{"0,30 2 * * *", Irregular, "* * *"},
		{"*/15 * * * *", Irregular, "* * *"},
		{"* * * * *", Irregular, "* * *"},
	}
	for _, tt := range tests {
		s, err := Parse(tt.expr, nil)
		if err != nil {
			t.Fatalf("Parse(%q) = %v", tt.expr, err)
		}
		if c, days := s.Cadence(); c != tt.cadence || days != tt.days {
			t.Errorf("Cadence of %q = %v, %q; want %v, %q", tt.expr, c, days, tt.cadence, tt.days)
		}
	}
}
