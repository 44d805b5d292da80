package schedule

// KindLevel is kindLevel, for TestKindLevels.
var KindLevel = kindLevel
