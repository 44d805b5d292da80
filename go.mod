module github.com/tranche-dev/tranche

go 1.26.0

require (
	github.com/google/go-cmp v0.7.0 // indirect
	golang.org/x/sync v0.25.0 // indirect
	pgregory.net/rapid v1.3.0 // indirect
)
