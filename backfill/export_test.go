package backfill

// KindLevel is kindLevel, for TestKindLevels.
var KindLevel = kindLevel
