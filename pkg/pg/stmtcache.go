// This file holds the statement cache of Open's connections: each statement
// with arguments becomes a named prepared statement of its connection,
// parsed once (a payment step commits ~1.8x more transactions a second). A
// statement whose text varies with the data (a VALUES list of n rows) takes
// an entry and a plan (~100 KiB) per shape: write it with arrays
// (outbox.Pending does). After five runs PostgreSQL may keep a generic
// plan, made without the arguments: a statement whose best plan depends on
// a value should say so in its shape (an ORDER BY on the indexed column
// with a LIMIT). A prepared statement keeps the types it was prepared with,
// so a migration that changes a column's type under a running instance can
// make it fail or, where a cast exists, coerce a value silently; no
// statement is kept past StatementMaxAge, but change a type in place only
// with every instance restarted after it, or add a column and move to it.
// TestAStatementIsPreparedAnewAfterItsTableChanged and
// TestADataExceptionOfAnOlderStatementIsNotFinal show why.

package pg

import (
	"container/list"
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/lib/pq"
)

// StatementCacheSize is how many parameterised statements each connection
// opened by Open keeps prepared, least recently used first out: lib/pq
// would parse and plan each anew on every execution. Callers keep writing
// tx.ExecContext(ctx, query, args...). After an error that says a statement
// went stale, every statement of the pool is dropped and the statement run
// again where that is safe: at once outside a transaction, from its start
// in InTx.
const StatementCacheSize = 256

// StatementMaxAge is how long a prepared statement is used before it is
// prepared again (see StatementCacheSize).
const StatementMaxAge = 10 * time.Minute

// now is the cache's clock; tests move it.
var now = time.Now

// cachingConnector opens lib/pq connections that prepare each
// parameterised statement once (see StatementCacheSize).
type cachingConnector struct {
	pq *pq.Connector
	// epoch counts the stale statements found on any connection of the
	// pool: a statement prepared in an earlier epoch is prepared again.
	// One migration makes the same statement stale on every connection;
	// the first failure spares the others theirs.
	epoch *atomic.Int64
}

func (c cachingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.pq.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return newCachingConn(conn, StatementCacheSize, c.epoch)
}

func (c cachingConnector) Driver() driver.Driver { return c.pq.Driver() }

// innerConn is what cachingConn needs of a lib/pq connection: every
// optional interface database/sql would otherwise find on it directly.
type innerConn interface {
	driver.Conn
	driver.ConnPrepareContext
	driver.ConnBeginTx
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
	driver.NamedValueChecker
}

// cachingConn is a lib/pq connection whose ExecContext and QueryContext
// with arguments run a prepared statement of the connection, preparing it
// on first use. database/sql uses a connection from one goroutine at a
// time, so the cache needs no lock.
type cachingConn struct {
	innerConn
	size  int
	stmts map[string]*list.Element // of *cachedStmt, most recent at the front
	lru   *list.List
	epoch *atomic.Int64 // the pool's: see cachingConnector
	inTx  bool          // between BeginTx and the end of its transaction
}

type cachedStmt struct {
	query string
	stmt  driver.Stmt
	at    time.Time // when it was prepared
	epoch int64     // the pool's epoch then
}

func newCachingConn(conn driver.Conn, size int, epoch *atomic.Int64) (*cachingConn, error) {
	inner, ok := conn.(innerConn)
	if !ok {
		conn.Close()
		return nil, fmt.Errorf("pg: %T lacks the interfaces the statement cache wraps", conn)
	}
	return &cachingConn{innerConn: inner, size: size, stmts: map[string]*list.Element{}, lru: list.New(), epoch: epoch}, nil
}

// BeginTx starts a transaction and notes it: a statement that fails in a
// transaction aborts it, so it cannot be run again in place.
func (c *cachingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.innerConn.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	c.inTx = true
	return endTx{Tx: tx, c: c}, nil
}

// endTx notes the end of its connection's transaction.
type endTx struct {
	driver.Tx
	c *cachingConn
}

func (t endTx) Commit() error {
	t.c.inTx = false
	return t.Tx.Commit()
}

func (t endTx) Rollback() error {
	t.c.inTx = false
	return t.Tx.Rollback()
}

// ExecContext runs query as a prepared statement when it has arguments;
// without arguments it goes as lib/pq sends it (the simple protocol, which
// allows several statements in one string).
func (c *cachingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if len(args) == 0 {
		return c.innerConn.ExecContext(ctx, query, args)
	}
	return runCached(ctx, c, query, func(st driver.Stmt) (driver.Result, error) {
		return st.(driver.StmtExecContext).ExecContext(ctx, args)
	})
}

// QueryContext is ExecContext for statements that return rows.
func (c *cachingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if len(args) == 0 {
		return c.innerConn.QueryContext(ctx, query, args)
	}
	return runCached(ctx, c, query, func(st driver.Stmt) (driver.Rows, error) {
		return st.(driver.StmtQueryContext).QueryContext(ctx, args)
	})
}

// runCached runs query's prepared statement on c with run. If PostgreSQL's
// answer says the statement was stale before it ran (planStale), outside a
// transaction — where the failed statement changed nothing — query is
// prepared and run again at once.
func runCached[T any](ctx context.Context, c *cachingConn, query string, run func(driver.Stmt) (T, error)) (T, error) {
	st, fresh, err := c.prepared(ctx, query)
	if err != nil {
		var zero T
		return zero, err
	}
	res, err := run(st)
	var stale staleError
	if err = c.forgetIfStale(query, fresh, err); !errors.As(err, &stale) || c.inTx {
		return res, err
	}
	if st, _, err = c.prepared(ctx, query); err != nil {
		var zero T
		return zero, err
	}
	res, err = run(st)
	return res, c.forgetIfStale(query, true, err)
}

// prepared returns query's statement on this connection, and whether it
// was prepared just now: preparing it if it is not cached or older than
// StatementMaxAge, and closing the least recently used one beyond the
// cache's size.
func (c *cachingConn) prepared(ctx context.Context, query string) (driver.Stmt, bool, error) {
	epoch := c.epoch.Load()
	if el, ok := c.stmts[query]; ok {
		if cs := el.Value.(*cachedStmt); cs.epoch == epoch && now().Sub(cs.at) < StatementMaxAge {
			c.lru.MoveToFront(el)
			return cs.stmt, false, nil
		}
		c.evict(el)
	}
	st, err := c.innerConn.PrepareContext(ctx, query)
	if err != nil {
		return nil, false, err
	}
	c.stmts[query] = c.lru.PushFront(&cachedStmt{query: query, stmt: st, at: now(), epoch: epoch})
	for c.lru.Len() > c.size {
		c.evict(c.lru.Back())
	}
	return st, true, nil
}

// forgetIfStale drops query's statement when PostgreSQL's error may be the
// statement's own rather than the data's, and returns the error the caller
// should see. After a migration a prepared statement can fail on every call
// where the same text prepared anew succeeds: the errors raised while it is
// checked against the tables (planStale) come back marked (IsStale) and
// drop every statement of the pool. A data exception (class 22) of a
// statement prepared earlier comes back without its *pq.Error, so a
// consumer retries it rather than dead-letter it. Errors of the data or the
// transaction keep the statement.
func (c *cachingConn) forgetIfStale(query string, fresh bool, err error) error {
	var pqErr *pq.Error
	if err == nil || !errors.As(err, &pqErr) {
		return err
	}
	switch class := pqErr.Code.Class(); {
	case class == "0A", // feature_not_supported: the result type changed
		class == "26", // invalid_sql_statement_name: the statement is gone
		class == "42", // syntax_error_or_access_rule_violation: a type, column or table changed
		class == "XX": // internal_error, e.g. a cache lookup of a dropped type
		c.forget(query)
		if !fresh && planStale[pqErr.Code] {
			c.epoch.Add(1)
			return staleError{err}
		}
	case class == "22" && !fresh:
		c.forget(query)
		return staleDataError{err}
	}
	return err
}

// planStale are the errors a statement prepared before a migration meets
// when PostgreSQL checks it against the tables again, before it has done
// anything: a statement that failed so can be run again, prepared afresh,
// without running twice.
var planStale = map[pq.ErrorCode]bool{
	"0A000": true, // cached plan must not change result type
	"26000": true, // prepared statement does not exist
	"42703": true, // undefined column
	"42P01": true, // undefined table
	"42804": true, // datatype mismatch
	"42883": true, // undefined function or operator: a parameter's type changed
}

// IsStale reports whether err came from a statement prepared before the
// call that failed, which may have failed for being stale (see
// StatementCacheSize) and has been dropped. A transaction it aborted can
// be run again; InTx does so once.
func IsStale(err error) bool {
	var s interface{ stale() }
	return errors.As(err, &s)
}

// staleError is the error of a statement prepared before the call that
// failed: see forgetIfStale. It unwraps to PostgreSQL's.
type staleError struct{ err error }

func (e staleError) Error() string { return e.err.Error() }
func (e staleError) Unwrap() error { return e.err }
func (staleError) stale()          {}

// staleDataError is a data exception from a statement prepared before the
// call that failed: see forgetIfStale. It does not unwrap to the
// *pq.Error, on purpose.
type staleDataError struct{ err error }

func (e staleDataError) Error() string {
	return e.err.Error() + " (from a statement prepared earlier, perhaps before a migration; prepared afresh on retry)"
}

func (staleDataError) stale() {}

// forget evicts query's statement, if cached.
func (c *cachingConn) forget(query string) {
	if el, ok := c.stmts[query]; ok {
		c.evict(el)
	}
}

// evict closes el's statement and forgets it. A failed close (the
// connection broke) is left to database/sql, which discards the
// connection on its next use.
func (c *cachingConn) evict(el *list.Element) {
	cs := c.lru.Remove(el).(*cachedStmt)
	delete(c.stmts, cs.query)
	_ = cs.stmt.Close()
}
