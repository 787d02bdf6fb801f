package tracker

// EarliestOffsets is earliestOffsets, for the tests.
var EarliestOffsets = earliestOffsets

// ReadTopics makes a tracker run with c read topics instead of Topics: a
// test's own, which it may drop records from.
func ReadTopics(c *Config, topics ...string) { c.topics = topics }
