// This file caps the bytes one round reads and publishes. A batch of
// BatchSize ordinary events is a few hundred KiB, but a burst of dead
// letters of up to 512 KiB each would otherwise take half a GiB into the
// relay's memory at once. TestARoundReadsABoundedNumberOfBytes shows it.

package outbox

import "strconv"

// maxRoundBytes caps the bytes of values one round reads (always at least
// one row).
const maxRoundBytes = 32 << 20

// byteCapped keeps, of the rows query selects (with txid), those whose
// values before them in the round's order stay under maxRoundBytes, and
// says in each row how many the query found, so the round knows whether
// more wait. PostgreSQL reads a long value's length without reading it.
func byteCapped(query string) string {
	return `
		SELECT id, topic, key, value, headers, found FROM (
			SELECT q.*, count(*) OVER () AS found,
			       sum(octet_length(q.value)) OVER (ORDER BY q.txid, q.id) - octet_length(q.value) AS before
			FROM (` + query + `) q
		) capped
		WHERE before < ` + strconv.Itoa(maxRoundBytes) + `
		ORDER BY txid, id`
}
