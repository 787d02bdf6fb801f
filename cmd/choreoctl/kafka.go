package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/choreo-saga/choreo/internal/cli"
	"github.com/choreo-saga/choreo/internal/kafkaacl"
)

// kafkaACLs is `choreoctl kafka-acls`: it creates the services' ACLs
// (internal/kafkaacl) on the brokers of -brokers or $KAFKA_BROKERS, as the
// administrator the environment names (KAFKA_USERNAME, KAFKA_PASSWORD or
// KAFKA_PASSWORD_FILE). scripts/infra.sh and deploy/compose's kafka-setup
// run it at every start; ACLs that exist already are left as they are.
func kafkaACLs(_ context.Context, args []string, getenv func(string) string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("choreoctl kafka-acls", flag.ContinueOnError)
	fs.SetOutput(errOut)
	brokers := fs.String("brokers", getenv("KAFKA_BROKERS"), "Kafka `brokers` (default $KAFKA_BROKERS or "+cli.DefaultBrokers+")")
	if err := fs.Parse(args); err != nil {
		return err
	}
	conn, err := cli.Kafka(*brokers, getenv)
	if err != nil {
		return fmt.Errorf("kafka-acls: %w", err)
	}
	admin, err := conn.NewClusterAdmin("choreoctl")
	if err != nil {
		return fmt.Errorf("kafka-acls: connect as %s: %w", conn.Username, err)
	}
	defer admin.Close()
	if err := kafkaacl.Apply(admin); err != nil {
		return err
	}
	if err := kafkaacl.CreateHeartbeatTopics(admin); err != nil {
		return err
	}
	n := 0
	for _, g := range kafkaacl.Grants {
		n += len(g.ACLs())
	}
	fmt.Fprintf(out, "kafka-acls: %d ACLs of %d users in place\n", n, len(kafkaacl.Grants))
	return nil
}
