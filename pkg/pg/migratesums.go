package pg

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"

	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"
)

// goose records only the version of a migration it applied, so a baseline
// edited after a database applied it (nothing is released: baselines change)
// leaves that database of the old shape with nothing said, and the service
// fails later and elsewhere (a relay that cannot find refused_at). The
// checksum of each migration, recorded before it is applied, lets Migrate
// refuse such a database at start. TestMigrateRefusesAnEditedMigration shows
// why.

// sumsTable holds, per schema and version, the SHA-256 of the migration file.
const sumsTable = `CREATE TABLE IF NOT EXISTS migration_sums (
	schema  text   NOT NULL,
	version bigint NOT NULL,
	sha256  text   NOT NULL,
	PRIMARY KEY (schema, version))`

// checkSums fails if a migration of s that the database applied is missing
// from dir or differs from the file that was applied, or was applied by a
// build that recorded no checksum; then it records the checksums of those not
// applied yet. It runs under the schema's migration lock.
func checkSums(ctx context.Context, conn *sqlx.Conn, name string, dir fs.FS) error {
	sums := map[int64]string{}
	files, err := fs.Glob(dir, "*.sql")
	if err != nil {
		return fmt.Errorf("pg: migrations %s: %w", name, err)
	}
	byVersion := map[int64]string{}
	for _, f := range files {
		v, err := goose.NumericComponent(path.Base(f))
		if err != nil {
			return fmt.Errorf("pg: migrations %s: %s: %w", name, f, err)
		}
		b, err := fs.ReadFile(dir, f)
		if err != nil {
			return fmt.Errorf("pg: migrations %s: %w", name, err)
		}
		h := sha256.Sum256(b)
		sums[v], byVersion[v] = hex.EncodeToString(h[:]), f
	}
	if _, err := conn.ExecContext(ctx, sumsTable); err != nil {
		return fmt.Errorf("pg: migrations %s: create migration_sums: %w", name, err)
	}
	var applied []struct {
		Version int64   `db:"version_id"`
		Sum     *string `db:"sha256"`
	}
	var exists bool
	if err := conn.GetContext(ctx, &exists, `SELECT to_regclass($1) IS NOT NULL`, "migrations_"+name); err != nil {
		return fmt.Errorf("pg: migrations %s: %w", name, err)
	}
	if exists {
		if err := conn.SelectContext(ctx, &applied, `SELECT DISTINCT m.version_id, s.sha256
			FROM migrations_`+name+` m LEFT JOIN migration_sums s ON s.schema = $1 AND s.version = m.version_id
			WHERE m.is_applied AND m.version_id > 0`, name); err != nil {
			return fmt.Errorf("pg: migrations %s: read applied versions: %w", name, err)
		}
	}
	const recreate = "nothing was released, so drop the database and let it be created again " +
		"(scripts/infra.sh: down, remove its state directory, up; docker compose: down -v)"
	done := map[int64]bool{}
	for _, a := range applied {
		done[a.Version] = true
		switch {
		case a.Sum == nil:
			return fmt.Errorf("pg: migrations %s: this database applied version %d before migrations were checksummed, "+
				"so its tables may be of an older shape; %s", name, a.Version, recreate)
		case sums[a.Version] == "":
			return fmt.Errorf("pg: migrations %s: this database applied version %d, which this build does not have; %s", name, a.Version, recreate)
		case *a.Sum != sums[a.Version]:
			return fmt.Errorf("pg: migrations %s: %s was edited after this database applied it; %s", name, byVersion[a.Version], recreate)
		}
	}
	for v, sum := range sums {
		if done[v] {
			continue
		}
		if _, err := conn.ExecContext(ctx, `INSERT INTO migration_sums (schema, version, sha256) VALUES ($1, $2, $3)
			ON CONFLICT (schema, version) DO UPDATE SET sha256 = excluded.sha256`, name, v, sum); err != nil {
			return fmt.Errorf("pg: migrations %s: record the checksum of version %d: %w", name, v, err)
		}
	}
	return nil
}
