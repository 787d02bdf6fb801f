package tracker

// Keeps is keeps, for the tests.
var Keeps = keeps

// ReadTopics makes a tracker run with c read topics instead of Topics: a
// test's own, whose retention it may set.
func ReadTopics(c *Config, topics ...string) { c.topics = topics }

// KafkaKeeps is kafkaKeeps, for the tests.
var KafkaKeeps = kafkaKeeps
