module github.com/tranche-dev/tranche/internal/cron/crosscheck

go 1.26.0

require (
	github.com/robfig/cron/v3 v3.0.1
	github.com/tranche-dev/tranche v0.1.0
)

require pgregory.net/rapid v1.3.0
