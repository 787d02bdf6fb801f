package infra

// RemoveStaleTempDirs exposes removeStaleTempDirs to the external tests.
var RemoveStaleTempDirs = removeStaleTempDirs
