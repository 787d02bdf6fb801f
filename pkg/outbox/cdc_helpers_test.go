package outbox_test

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/choreo-saga/choreo/pkg/outbox"
)

// Debezium's view of a database, without a Connect worker: a pgoutput slot
// of the test's own, read with pg_logical_slot_peek_binary_changes, shows
// exactly what the connector would be sent.

// change is one decoded row change: its operation ('I', 'U', 'D'), its
// table and, for an insert, its columns (nil for NULL).
type change struct {
	Op    byte
	Table string
	Cols  map[string]*string
}

// newSlot publishes db's outbox (outbox.Publish) and creates the pgoutput
// slot of service's connector, dropped when the test ends.
func newSlot(t *testing.T, db *testDB, service string) string {
	t.Helper()
	ctx := context.Background()
	if err := outbox.Publish(ctx, db.DB); err != nil {
		t.Fatal(err)
	}
	slot := outbox.Slot(service)
	if _, err := db.ExecContext(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, slot); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropSlot(t, db, slot) })
	return slot
}

func dropSlot(t *testing.T, db *testDB, slot string) {
	t.Helper()
	if _, err := db.Exec(`SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, slot); err != nil {
		t.Error(err)
	}
}

// decoded is what slot would send a connector of Publication so far,
// row changes only, in commit order.
func decoded(t *testing.T, db *testDB, slot string) []change {
	t.Helper()
	var msgs [][]byte
	if err := db.Select(&msgs, `SELECT data FROM pg_logical_slot_peek_binary_changes($1, NULL, NULL, 'proto_version', '1', 'publication_names', $2)`, slot, outbox.Publication); err != nil {
		t.Fatal(err)
	}
	tables := map[uint32]string{}
	var out []change
	for _, m := range msgs {
		p := &pgoutput{b: m}
		switch op := p.byte(); op {
		case 'R':
			id := p.uint32()
			p.string() // namespace
			tables[id] = p.string()
		case 'I':
			rel := tables[p.uint32()]
			p.byte() // 'N'
			out = append(out, change{Op: op, Table: rel, Cols: p.tuple(t, db, rel)})
		case 'U', 'D':
			out = append(out, change{Op: op, Table: tables[p.uint32()]})
		}
	}
	return out
}

// pgoutput reads the fields of one pgoutput message.
type pgoutput struct{ b []byte }

func (p *pgoutput) byte() byte { c := p.b[0]; p.b = p.b[1:]; return c }
func (p *pgoutput) uint32() uint32 {
	v := binary.BigEndian.Uint32(p.b)
	p.b = p.b[4:]
	return v
}
func (p *pgoutput) string() string {
	for i, c := range p.b {
		if c == 0 {
			s := string(p.b[:i])
			p.b = p.b[i+1:]
			return s
		}
	}
	panic("pgoutput: unterminated string")
}

// tuple reads a TupleData, naming its columns by rel's attribute order.
func (p *pgoutput) tuple(t *testing.T, db *testDB, rel string) map[string]*string {
	t.Helper()
	var names []string
	if err := db.Select(&names, `SELECT attname FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`, rel); err != nil {
		t.Fatal(err)
	}
	n := int(binary.BigEndian.Uint16(p.b))
	p.b = p.b[2:]
	cols := map[string]*string{}
	for i := range n {
		switch p.byte() {
		case 't':
			l := int(p.uint32())
			v := string(p.b[:l])
			p.b = p.b[l:]
			cols[names[i]] = &v
		default: // 'n' NULL, 'u' unchanged TOAST
			cols[names[i]] = nil
		}
	}
	return cols
}

// inserts are the values of column col of changes' inserts into table.
func inserts(changes []change, table, col string) []string {
	var out []string
	for _, c := range changes {
		if c.Op == 'I' && c.Table == table {
			v := "<nil>"
			if p := c.Cols[col]; p != nil {
				v = *p
			}
			out = append(out, v)
		}
	}
	return out
}
