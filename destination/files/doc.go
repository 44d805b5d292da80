// Package files is a destination that writes JSON lines: one file per
// asset and partition, replaced whole by each write, fenced by the
// attempt's token under a lock of the partition's folder.
//
//	dest := &files.Destination{Dir: "warehouse"}
//	asset := tranche.Asset{Name: "daily_totals", Destinations: []tranche.Destination{dest}, ...}
//
// It needs only the standard library, so it lives in the root module; the
// Parquet destination (destination/parquet), a module of its own for its
// driver, shares its folder lock, synced folders, temporary files and
// escaped names through an internal package. [Destination] says what lands
// where and what a write guarantees; tranchetest reads the files back.
package files
