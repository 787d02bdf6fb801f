package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/choreo-saga/choreo/services/order/internal/domain"
)

// List returns a page of the orders q selects, newest first (created_at
// DESC, id DESC), starting after q.After. It seeks with a row comparison
// on the sort key — never OFFSET — so a page costs the same however deep
// it is, and an order created or cancelled meanwhile neither repeats nor
// skips one on a later page. Only the filters q sets are in the WHERE, so
// each combination is served by its index of migrations/00001_order.sql.
func (s *Store) List(ctx context.Context, q domain.ListQuery) (domain.Page, error) {
	query, args := listQuery(q)
	var rows []row
	if err := s.db.SelectContext(ctx, &rows, query, args...); err != nil {
		return domain.Page{}, fmt.Errorf("list orders %+v: %w", q, err)
	}
	orders := make([]domain.Order, 0, len(rows))
	for _, r := range rows {
		o, err := r.order()
		if err != nil {
			return domain.Page{}, err
		}
		orders = append(orders, o)
	}
	return domain.NewPage(orders, q.Limit), nil
}

// listQuery returns the parameterised SELECT of List: limit+1 rows, the
// one past the page telling that another follows.
func listQuery(q domain.ListQuery) (string, []any) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if q.CustomerID != "" {
		where = append(where, "customer_id = "+arg(q.CustomerID))
	}
	if q.Status != "" {
		where = append(where, "status = "+arg(string(q.Status)))
	}
	if q.After != nil {
		where = append(where, "(created_at, id) < ("+arg(q.After.CreatedAt)+", "+arg(q.After.ID)+"::uuid)")
	}
	query := `SELECT ` + columns + ` FROM orders`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	query += ` ORDER BY created_at DESC, id DESC LIMIT ` + arg(q.Limit+1)
	return query, args
}
