//go:build race

package release

const raceEnabled = true
