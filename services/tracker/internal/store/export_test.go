package store

// RecordIn is Record's work inside a transaction of the test's, which it
// may hold open.
var RecordIn = record
