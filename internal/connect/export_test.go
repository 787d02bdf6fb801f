package connect

// Hooks for the tests in package connect_test.

// AwaitRunning is Start's wait for the connector to run.
var AwaitRunning = awaitRunning
