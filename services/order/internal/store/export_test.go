package store

// ListQuery is List's SQL and arguments, for the test that EXPLAINs it.
var ListQuery = listQuery
