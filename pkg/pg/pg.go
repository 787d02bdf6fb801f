// Package pg opens a service's PostgreSQL database — every session bounded
// by SessionDefaults, so a frozen process cannot hold locks or the outbox
// relay's horizon for long, and every parameterised statement prepared once
// per connection (StatementCacheSize) — and brings its schema up to date
// from embedded goose migrations.
package pg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/choreo-saga/choreo/pkg/fault"
)

// SessionDefaults are the server-side limits every session opened by Open
// runs under, unless its URL sets them itself. They bound how long a
// process that froze (SIGSTOP, a paused container) or vanished (a
// partitioned host) keeps what its session holds: row locks, the relay's
// leadership, the snapshot that holds back every relay's xmin. A live
// handler's transaction is bounded by the client (participant.TxTimeout); a
// server-side statement_timeout would also cut a long migration, failing
// every restart.
var SessionDefaults = map[string]string{
	// A transaction left open and idle (its process stopped mid-handler) is
	// ended, its locks released, after 15 s.
	"idle_in_transaction_session_timeout": "15000", // ms
	// A client whose host is gone is noticed after about 5 + 3×2 = 11 s
	// instead of the kernel's two hours.
	"tcp_keepalives_idle":     "5", // s
	"tcp_keepalives_interval": "2", // s
	"tcp_keepalives_count":    "3",
}

// WithSessionDefaults returns rawURL with every SessionDefaults parameter
// it does not set already; lib/pq sends them as run-time parameters when it
// connects.
func WithSessionDefaults(rawURL string) (string, error) {
	u, err := parseURL(rawURL)
	if err != nil {
		return "", fmt.Errorf("pg: database URL: %w", err)
	}
	q := u.Query()
	if !q.Has("binary_parameters") {
		q.Set("binary_parameters", "yes")
	}
	for k, v := range SessionDefaults {
		if !q.Has(k) {
			q.Set(k, v)
		}
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// Open connects to url, with SessionDefaults and each connection's
// statements prepared once (StatementCacheSize), and waits, with backoff, up
// to wait for the database to answer, so a service started next to a
// database that is still booting does not crash-loop. It returns the last
// error if the database never answers.
func Open(ctx context.Context, rawURL string, wait time.Duration) (*sqlx.DB, error) {
	dsn, err := WithSessionDefaults(rawURL)
	if err != nil {
		return nil, err
	}
	connector, err := pq.NewConnector(dsn)
	if err != nil {
		return nil, fmt.Errorf("pg: open: %w", err)
	}
	db := sqlx.NewDb(sql.OpenDB(cachingConnector{pq: connector, epoch: new(atomic.Int64)}), "postgres")
	// Idle connections are kept up to the maximum: one closed on release
	// takes its prepared statements with it, and a burst would prepare
	// them again.
	db.SetMaxOpenConns(20)
	db.SetMaxIdleConns(20)
	db.SetConnMaxIdleTime(5 * time.Minute)

	ping := func() (struct{}, error) {
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		return struct{}{}, db.PingContext(pctx)
	}
	if _, err := backoff.Retry(ctx, ping, backoff.WithMaxElapsedTime(wait)); err != nil {
		db.Close()
		return nil, fmt.Errorf("pg: database not reachable after %s: %w", wait, err)
	}
	return db, nil
}

// Schema is one set of migrations, tracked in a goose version table of its
// own so that shared packages (pkg/outbox, pkg/idem) and the service can each
// version their tables independently.
//
// Each schema starts from one baseline, 00001_<name>.sql, into which the
// migrations written before the first release were folded. A database
// migrated by those older files cannot be brought to the baseline: drop it
// and let it be created again (Migrate refuses it, saying so).
type Schema struct {
	// Name names the version table: migrations_<Name>.
	Name string
	// FS holds the migration files.
	FS fs.FS
	// Dir is the directory inside FS, e.g. "migrations".
	Dir string
}

// Migrate applies every schema in order. A PostgreSQL advisory lock, one per
// schema, makes it safe for two instances of a service to start at once: the
// second waits and then finds nothing to do.
func Migrate(ctx context.Context, db *sqlx.DB, log *slog.Logger, schemas ...Schema) error {
	for _, s := range schemas {
		if err := migrateOne(ctx, db, log, s); err != nil {
			return err
		}
	}
	return nil
}

func migrateOne(ctx context.Context, db *sqlx.DB, log *slog.Logger, s Schema) error {
	if s.Name == "" || s.FS == nil {
		return errors.New("pg: schema needs a Name and an FS")
	}
	sub, err := fs.Sub(s.FS, s.Dir)
	if err != nil {
		return fmt.Errorf("pg: migrations %s: %w", s.Name, err)
	}
	if err := refuseLegacy(ctx, db, s.Name); err != nil {
		return err
	}
	h := fnv.New64a()
	h.Write([]byte("choreo-migrate-" + s.Name))
	locker, err := lock.NewPostgresSessionLocker(
		lock.WithLockID(int64(h.Sum64()>>1)),
		lock.WithLockTimeout(1, 120), // poll every second, for up to two minutes
	)
	if err != nil {
		return fmt.Errorf("pg: locker: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db.DB, sub,
		goose.WithTableName("migrations_"+s.Name),
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		return fmt.Errorf("pg: migrations %s: %w", s.Name, err)
	}
	// One instance at a time checks the checksums and migrates; goose's own
	// lock is taken inside it, by every instance in the same order.
	conn, err := db.Connx(ctx)
	if err != nil {
		return fmt.Errorf("pg: migrations %s: %w", s.Name, err)
	}
	defer conn.Close()
	h.Write([]byte("-sums"))
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, int64(h.Sum64()>>1)); err != nil {
		return fmt.Errorf("pg: migrations %s: lock: %w", s.Name, err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock_all()`)
	if err := checkSums(ctx, conn, s.Name, sub); err != nil {
		return err
	}
	results, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("pg: migrate %s: %w", s.Name, err)
	}
	for _, r := range results {
		log.Info("migration applied", "schema", s.Name, "file", r.Source.Path)
	}
	return nil
}

// refuseLegacy fails when the database records its versions of schema name
// in goose_<name>, the table of the migrations folded into the baseline.
// Those versions mean nothing to the baseline: left alone, goose would either
// skip the baseline over tables of an older shape or fail on the first new
// migration. The version table was renamed with the fold so that such a
// database is told apart from a fresh one, and from one a newer release
// migrated further.
func refuseLegacy(ctx context.Context, db *sqlx.DB, name string) error {
	var found struct {
		Legacy   bool   `db:"legacy"`
		Database string `db:"database"`
	}
	err := db.GetContext(ctx, &found, `SELECT to_regclass($1) IS NOT NULL AS legacy, current_database() AS database`, "goose_"+name)
	if err != nil {
		return fmt.Errorf("pg: migrations %s: look for goose_%s: %w", name, name, err)
	}
	if found.Legacy {
		return fmt.Errorf("pg: migrations %s: database %s was migrated before the migrations were folded into "+
			"one baseline per schema (its table goose_%s records the old versions); nothing was released, so drop "+
			"the database and let it be created again (scripts/infra.sh up creates a missing one; "+
			"docker compose: down -v)", name, found.Database, name)
	}
	return nil
}

// Get reads the one row query returns into a T. what names the row in the
// error: a fault.NotFound error "<what>" when there is none (a 404 over
// HTTP), "get <what>: <cause>" when the query fails.
//
//	a, err := pg.Get[domain.Account](ctx, db, "account "+id, `SELECT … WHERE customer_id = $1`, id)
func Get[T any](ctx context.Context, q sqlx.QueryerContext, what, query string, args ...any) (T, error) {
	var v T
	err := sqlx.GetContext(ctx, q, &v, query, args...)
	if errors.Is(err, sql.ErrNoRows) {
		return v, fault.Errorf(fault.NotFound, "%s", what)
	}
	if err != nil {
		return v, fmt.Errorf("get %s: %w", what, err)
	}
	return v, nil
}

// InTx runs fn in a transaction and commits it if fn returns nil. A
// transaction aborted by a stale prepared statement (IsStale: a migration
// changed a table under the running service) is run once more, from the
// start, on statements prepared afresh — so fn may run twice, and must
// change nothing but through tx.
func InTx(ctx context.Context, db *sqlx.DB, fn func(tx *sqlx.Tx) error) error {
	err := inTx(ctx, db, fn)
	if IsStale(err) {
		err = inTx(ctx, db, fn)
	}
	return err
}

func inTx(ctx context.Context, db *sqlx.DB, fn func(tx *sqlx.Tx) error) error {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("pg: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("pg: commit: %w", err)
	}
	return nil
}

// ValidateURL checks a connection URL such as DATABASE_URL before any
// connection is tried, so a typo fails at start with a clear message.
func ValidateURL(raw string) error {
	u, err := parseURL(raw)
	if err != nil {
		return err
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return fmt.Errorf("scheme must be postgres:// or postgresql://, got %q", u.Scheme)
	}
	if u.Host == "" {
		return errors.New("no host")
	}
	if strings.Trim(u.Path, "/") == "" {
		return errors.New("no database name in the path")
	}
	return nil
}

// parseURL is url.Parse with an error that holds nothing of raw. Parse's
// own quotes the whole URL, password included, and a password holding a
// '/' or '#' ends the host early, so even its detail ("invalid port")
// would show part of the password in a log.
func parseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("not a URL (the user and password must percent-encode characters such as / # ? @ :)")
	}
	return u, nil
}

// LockConflict reports whether err is PostgreSQL's deadlock (40P01) or
// serialization failure (40001): the transaction lost a race for locks and
// may simply run again.
func LockConflict(err error) bool {
	var pqErr *pq.Error
	return errors.As(err, &pqErr) && (pqErr.Code == "40P01" || pqErr.Code == "40001")
}
