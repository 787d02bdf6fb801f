package testenv

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/lib/pq"

	"github.com/choreo-saga/choreo/pkg/pg"
)

// OwnDatabase creates an empty database of the test's own on the test
// server and returns its URL; the database is dropped, with any session
// still connected to it, when the test ends.
//
// DB's schemas share one database; a database of its own also gives a test
// its own LISTEN/NOTIFY channels, advisory locks and pg_stat_activity rows
// (current_database()), so that other packages' tests running at the same
// time do not wake, block or show up in it. It does not isolate the
// transaction horizon: snapshots, and so pg_snapshot_xmin, span every
// database of the server.
func OwnDatabase(t testing.TB) string {
	t.Helper()
	base := DatabaseURL(t)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("test database URL: %v", err)
	}
	// The shared database's name, then a random suffix: recognisably a test
	// database, and within PostgreSQL's 63 bytes.
	name := strings.TrimPrefix(u.Path, "/")
	name = name[:min(len(name), 40)] + "_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:16]

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := openAdmin(ctx, t, base)
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE `+pq.QuoteIdentifier(name)); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		admin, err := pg.Open(ctx, base, 10*time.Second)
		if err != nil {
			t.Errorf("drop database %s: %v", name, err)
			return
		}
		defer admin.Close()
		// FORCE (PostgreSQL 13) ends sessions a test left behind.
		if _, err := admin.ExecContext(ctx, `DROP DATABASE IF EXISTS `+pq.QuoteIdentifier(name)+` WITH (FORCE)`); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u.Path = "/" + name
	return u.String()
}
