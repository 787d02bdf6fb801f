package connect

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Secrets are what a connector's configuration must not hold, and where
// the worker reads them instead: Kafka's FileConfigProvider resolves
// ${file:<path>:<key>} when it starts the connector, while the REST API and
// the worker's config topic keep the reference (TestConfigReadBackHoldsNoPassword).
type Secrets struct {
	// Dir holds one properties file per connector, owner-only. The worker
	// reads it (scripts/infra.sh names it in the worker's allowed.paths,
	// KAFKA_CONNECT_SECRETS_DIR) and Start writes it, so both must see the
	// same directory: the worker's machine, or a volume they share.
	Dir string
	// KafkaPassword is the service's SCRAM password: its connector
	// produces as the service's own Kafka user (identity.go).
	KafkaPassword string
}

// The keys of a connector's secrets file.
const (
	keyDatabasePassword = "database.password"
	keyKafkaPassword    = "kafka.password"
)

// secretsFile is the path of connector name's secrets file in dir.
func secretsFile(dir, name string) (string, error) {
	if dir == "" {
		return "", fmt.Errorf("connect: no secrets directory for %s (KAFKA_CONNECT_SECRETS_DIR)", name)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("connect: secrets directory: %w", err)
	}
	return filepath.Join(abs, name+".properties"), nil
}

// secretRef is the FileConfigProvider reference to key in file.
func secretRef(file, key string) string { return "${file:" + file + ":" + key + "}" }

// WriteSecrets writes connector name's secrets file in s.Dir: the password
// of databaseURL, if it has one, and s.KafkaPassword. It replaces the file
// whole (a rename), so the worker never reads half of one.
func WriteSecrets(s Secrets, name, databaseURL string) error {
	file, err := secretsFile(s.Dir, name)
	if err != nil {
		return err
	}
	if s.KafkaPassword == "" {
		return fmt.Errorf("connect: no Kafka password for %s", name)
	}
	// The password goes into a quoted JAAS string (identity.go).
	if strings.ContainsAny(s.KafkaPassword, "\"\\\r\n") {
		return fmt.Errorf("connect: %s's Kafka password holds a quote, backslash or line break, which its JAAS configuration cannot carry", name)
	}
	u, err := url.Parse(databaseURL)
	if err != nil {
		return fmt.Errorf("connect: database URL of %s: not a URL", name)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s's secrets, written by choreo (internal/connect), read by the Kafka Connect worker\n", name)
	if pw, ok := u.User.Password(); ok {
		b.WriteString(keyDatabasePassword + "=" + propertyValue(pw) + "\n")
	}
	b.WriteString(keyKafkaPassword + "=" + propertyValue(s.KafkaPassword) + "\n")

	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("connect: secrets directory: %w", err)
	}
	tmp, err := os.CreateTemp(s.Dir, "."+name+"-*")
	if err != nil {
		return fmt.Errorf("connect: secrets of %s: %w", name, err)
	}
	defer os.Remove(tmp.Name()) // after the rename, there is nothing to remove
	if _, err := tmp.WriteString(b.String()); err != nil {
		tmp.Close()
		return fmt.Errorf("connect: secrets of %s: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("connect: secrets of %s: %w", name, err)
	}
	// CreateTemp makes the file 0600.
	if err := os.Rename(tmp.Name(), file); err != nil {
		return fmt.Errorf("connect: secrets of %s: %w", name, err)
	}
	return nil
}

// RemoveSecrets deletes connector name's secrets file from dir, if there.
func RemoveSecrets(dir, name string) error {
	file, err := secretsFile(dir, name)
	if err != nil {
		return err
	}
	if err := os.Remove(file); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("connect: secrets of %s: %w", name, err)
	}
	return nil
}

// propertyValue escapes v for a Java properties file: a backslash, leading
// space and line breaks would otherwise change it, and anything beyond
// ASCII is written as \uXXXX, which every reader of the format takes.
func propertyValue(v string) string {
	var b strings.Builder
	for i, r := range v {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == ' ' && i == 0:
			b.WriteString(`\ `)
		case r < 0x20 || r > 0x7e:
			for _, u := range utf16(r) {
				fmt.Fprintf(&b, `\u%04x`, u)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// utf16 is r's UTF-16 code units, as \u escapes name them.
func utf16(r rune) []uint16 {
	if r < 0x10000 {
		return []uint16{uint16(r)}
	}
	r -= 0x10000
	return []uint16{uint16(0xd800 + (r >> 10)), uint16(0xdc00 + (r & 0x3ff))}
}
