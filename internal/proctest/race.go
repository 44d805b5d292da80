//go:build race

package proctest

// raceEnabled reports whether the test binary was built with -race.
const raceEnabled = true
