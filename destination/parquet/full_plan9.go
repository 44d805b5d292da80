package parquet

// explainFull leaves err as it is: Plan 9's errors have no numbers to
// tell a full disk by.
func explainFull(err error) error { return err }
