module github.com/tranche-dev/tranche/cmd/tranche

go 1.26.0

require (
	github.com/chromedp/chromedp v0.23.0
	github.com/tranche-dev/tranche v0.1.0
	github.com/tranche-dev/tranche/ledger/postgres v0.1.0
	github.com/tranche-dev/tranche/ledger/sqlite v0.1.0
)
