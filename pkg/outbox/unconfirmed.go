package outbox

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// Unconfirmed counts the rows of db's outbox that Debezium may not have
// published yet, by the rule Sweep deletes by: what a test or the chaos
// suite waits on before it counts, where the built-in relay's answer is
// the rows not sent. A published row stays until the sweep, a minute or
// two later, so sent_at says nothing here. Once slot's confirmed_flush_lsn
// has reached mark.LSN, the connector has published, and committed its
// offsets for, every row of the transactions below mark.Xmin: until then
// every row counts, and after it those of later transactions, and those
// without the trigger's mark (pending a hand-over). Refused rows are not
// counted: nothing publishes them.
//
// An empty mark is set to now. The mark stays while the slot has not
// reached it (a later record, a heartbeat at worst, must follow) or nothing
// came after it, so a second call asks whether anything was written since
// the first; once the slot reached it and rows came after, it is emptied.
func Unconfirmed(ctx context.Context, db *sqlx.DB, slot string, mark *SweepMark) (int, error) {
	if mark.LSN == "" {
		m, err := newMark(ctx, db)
		if err != nil {
			return 0, err
		}
		*mark = m
	}
	reached, err := slotReached(ctx, db, slot, *mark)
	if err != nil {
		return 0, err
	}
	var n int
	if err := db.GetContext(ctx, &n, `SELECT count(*) FROM outbox WHERE sent_at IS NULL AND refused_at IS NULL
		AND (NOT cdc OR NOT $1 OR txid >= $2::xid8)`, reached, mark.Xmin); err != nil {
		return 0, fmt.Errorf("outbox: count unconfirmed rows: %w", err)
	}
	if reached && n > 0 {
		*mark = SweepMark{}
	}
	return n, nil
}
