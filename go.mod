module github.com/tranche-dev/tranche

go 1.26.0

require (
	github.com/google/go-cmp v0.7.0
	golang.org/x/sync v0.25.0
	pgregory.net/rapid v1.3.0
)
