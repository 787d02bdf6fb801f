package pg

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/choreo-saga/choreo/pkg/tick"
)

// OnceKeyLifetime is how long Once remembers a key. A client retrying later
// than this applies its request again; Stripe keeps its keys a day, a week
// leaves room for a retry queue that was down over a weekend.
const OnceKeyLifetime = 7 * 24 * time.Hour

// forgetBatch bounds one DELETE, so a large backlog never holds long locks.
const forgetBatch = 5000

// ForgetOnceKeys deletes the keys of Once's table recorded more than keep
// ago, a batch at a time, and returns how many it deleted. Without it the
// table grows with every request for ever.
func ForgetOnceKeys(ctx context.Context, db *sqlx.DB, table string, keep time.Duration) (int64, error) {
	var total int64
	for {
		// The cutoff is the database's clock, the one created_at was set by.
		res, err := db.ExecContext(ctx, `DELETE FROM `+table+` WHERE ctid = ANY (ARRAY(
			SELECT ctid FROM `+table+` WHERE created_at < now() - make_interval(secs => $1) LIMIT $2))`,
			keep.Seconds(), forgetBatch)
		if err != nil {
			return total, fmt.Errorf("forget idempotency keys of %s: %w", table, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("forget idempotency keys of %s: %w", table, err)
		}
		total += n
		if n < forgetBatch {
			return total, nil
		}
	}
}

// ForgetOnceKeysJob runs ForgetOnceKeys for table every hour until ctx
// ends; it has the shape of a service's background job.
func ForgetOnceKeysJob(table string) func(ctx context.Context, db *sqlx.DB, log *slog.Logger) error {
	return func(ctx context.Context, db *sqlx.DB, log *slog.Logger) error {
		return tick.Every(ctx, time.Hour, func(ctx context.Context) {
			if n, err := ForgetOnceKeys(ctx, db, table, OnceKeyLifetime); err != nil {
				log.Warn("forgetting old idempotency keys failed; will try again", "table", table, "err", err)
			} else if n > 0 {
				log.Info("old idempotency keys forgotten", "table", table, "keys", n)
			}
		})
	}
}
