// Package kafkaacl is who may do what on Kafka: one SCRAM user per service
// and the ACLs that let it do its job and nothing else. It is the one
// definition every run mode applies: scripts/infra.sh and deploy/compose
// through `choreoctl kafka-acls` (as the administrator, over the Admin
// API), deploy/local and the embedded test broker by seeding kfake.
//
// Adding a service means adding its Grant here; the package's test fails
// while a service's Spec produces or consumes a topic its Grant does not
// name.
package kafkaacl

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/IBM/sarama"

	"github.com/choreo-saga/choreo/pkg/events"
	"github.com/choreo-saga/choreo/pkg/outbox"
)

// Grant is one service's Kafka identity and what it may touch.
type Grant struct {
	// User is its SCRAM user: the service's name.
	User string
	// Group is the one consumer group it may join and commit offsets in.
	Group string
	// Produces are its own topic, its dead-letter topic and its Debezium
	// connector's heartbeat topic: it may write them, and no other.
	Produces []string
	// Consumes are the topics it reads.
	Consumes []string
}

// Grants are the services' identities, the tracker's included.
var Grants = []Grant{
	service("order", events.TopicOrder, events.TopicPayment, events.TopicInventory, events.TopicShipping),
	service("payment", events.TopicPayment, events.TopicOrder, events.TopicInventory),
	service("inventory", events.TopicInventory, events.TopicOrder, events.TopicPayment, events.TopicShipping),
	service("shipping", events.TopicShipping, events.TopicOrder, events.TopicInventory),
	// The tracker only reads; it emits nothing and dead-letters nothing.
	{User: "tracker", Group: "tracker", Consumes: []string{events.TopicOrder, events.TopicPayment, events.TopicInventory, events.TopicShipping}},
	connect(),
}

// ConnectTopics are where the Kafka Connect worker of OUTBOX_RELAY=debezium
// keeps its connectors' configuration, source offsets and status
// (scripts/infra.sh writes them into its worker.properties).
var ConnectTopics = []string{"choreo-connect-configs", "choreo-connect-offsets", "choreo-connect-status"}

// connect is the worker's Grant: its own topics, read and written in its
// own group, and none of the services'. Each connector produces as its
// service's user (internal/connect), so a worker's credentials cannot
// write an event in any service's name.
func connect() Grant {
	return Grant{User: "connect", Group: "choreo-connect", Produces: ConnectTopics, Consumes: ConnectTopics}
}

// service is a service's Grant; under OUTBOX_RELAY=debezium its connector
// produces as the service, its heartbeats included.
func service(name, produces string, consumes ...string) Grant {
	return Grant{User: name, Group: name, Produces: []string{produces, events.DeadLetterTopic(name), outbox.HeartbeatTopic(name)}, Consumes: consumes}
}

// CreateHeartbeatTopics creates, through admin, the topic each service's
// Debezium connector sends its heartbeats to (outbox.HeartbeatTopic), where
// missing: the brokers create no topic on a write, and the worker's
// producer would wait for one in vain. One partition, kept an hour: nobody
// reads them.
func CreateHeartbeatTopics(admin sarama.ClusterAdmin) error {
	hour := "3600000"
	for _, g := range Grants {
		for _, t := range g.Produces {
			if !strings.HasPrefix(t, "__debezium-heartbeat.") {
				continue
			}
			err := admin.CreateTopic(t, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: -1, ConfigEntries: map[string]*string{"retention.ms": &hour}}, false)
			if err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
				return fmt.Errorf("kafkaacl: create %s: %w", t, err)
			}
		}
	}
	return nil
}

// Users are the names of Grants' users, in order.
func Users() []string {
	var names []string
	for _, g := range Grants {
		names = append(names, g.User)
	}
	return names
}

// ACL is one permission: Operation on the resource of type Resource named
// Name (literally, never a prefix), allowed to the grant's user from any
// host. Kafka denies everything no ACL allows (the brokers run with
// allow.everyone.if.no.acl.found=false).
type ACL struct {
	Resource  sarama.AclResourceType
	Name      string
	Operation sarama.AclOperation
}

// ACLs are what g's user is allowed:
//   - its topics (Produces): Write and Describe; IdempotentWrite on the
//     cluster, which the idempotent producer (broker.Settings) needs;
//   - what it consumes: Read (offsets, fetches), Describe, and
//     DescribeConfigs (the retention jobs read retention.ms);
//   - its group: Read (join, commit) and Describe (lag, retention);
//   - Create on every topic it names, because the runtime creates the
//     topics it touches when they are missing (broker.EnsureTopicsWith) and
//     a consumer may start before the producer of what it reads. Create
//     gives neither Write nor Read, and the settings of the topic come from
//     the same configuration whoever creates it.
func (g Grant) ACLs() []ACL {
	var acls []ACL
	topic := func(name string, ops ...sarama.AclOperation) {
		for _, op := range ops {
			acls = append(acls, ACL{Resource: sarama.AclResourceTopic, Name: name, Operation: op})
		}
	}
	for _, t := range g.Produces {
		topic(t, sarama.AclOperationWrite, sarama.AclOperationDescribe, sarama.AclOperationCreate)
	}
	for _, t := range g.Consumes {
		topic(t, sarama.AclOperationRead, sarama.AclOperationDescribe, sarama.AclOperationDescribeConfigs, sarama.AclOperationCreate)
	}
	acls = append(acls,
		ACL{Resource: sarama.AclResourceGroup, Name: g.Group, Operation: sarama.AclOperationRead},
		ACL{Resource: sarama.AclResourceGroup, Name: g.Group, Operation: sarama.AclOperationDescribe})
	if len(g.Produces) > 0 {
		acls = append(acls, ACL{Resource: sarama.AclResourceCluster, Name: "kafka-cluster", Operation: sarama.AclOperationIdempotentWrite})
	}
	return acls
}

// Principal is the Kafka principal of a SCRAM user.
func Principal(user string) string { return "User:" + user }

// Apply makes every Grant's user hold exactly its ACLs, through admin,
// which must be the administrator: it creates the missing ones and deletes
// any other ACL of those users, so a permission dropped from Grants leaves
// the clusters too. It can run on every start.
func Apply(admin sarama.ClusterAdmin) error {
	var all []*sarama.ResourceAcls
	for _, g := range Grants {
		for _, a := range g.ACLs() {
			all = append(all, &sarama.ResourceAcls{
				Resource: sarama.Resource{ResourceType: a.Resource, ResourceName: a.Name, ResourcePatternType: sarama.AclPatternLiteral},
				Acls: []*sarama.Acl{{
					Principal: Principal(g.User), Host: "*",
					Operation: a.Operation, PermissionType: sarama.AclPermissionAllow,
				}},
			})
		}
	}
	if err := admin.CreateACLs(all); err != nil {
		return fmt.Errorf("kafkaacl: create ACLs: %w", err)
	}
	return removeStale(admin)
}

// removeStale deletes the ACLs of Grants' users that their Grant does not list.
func removeStale(admin sarama.ClusterAdmin) error {
	for _, g := range Grants {
		want := map[ACL]bool{}
		for _, a := range g.ACLs() {
			want[a] = true
		}
		principal := Principal(g.User)
		held, err := admin.ListAcls(sarama.AclFilter{
			ResourceType: sarama.AclResourceAny, ResourcePatternTypeFilter: sarama.AclPatternAny,
			Principal: &principal, Operation: sarama.AclOperationAny, PermissionType: sarama.AclPermissionAny,
		})
		if err != nil {
			return fmt.Errorf("kafkaacl: list the ACLs of %s: %w", g.User, err)
		}
		for _, r := range held {
			for _, a := range r.Acls {
				literalAllow := r.ResourcePatternType == sarama.AclPatternLiteral && a.PermissionType == sarama.AclPermissionAllow && a.Host == "*"
				if literalAllow && want[ACL{Resource: r.ResourceType, Name: r.ResourceName, Operation: a.Operation}] {
					continue
				}
				name, host := r.ResourceName, a.Host
				if _, err := admin.DeleteACL(sarama.AclFilter{
					ResourceType: r.ResourceType, ResourceName: &name, ResourcePatternTypeFilter: r.ResourcePatternType,
					Principal: &principal, Host: &host, Operation: a.Operation, PermissionType: a.PermissionType,
				}, false); err != nil {
					return fmt.Errorf("kafkaacl: delete a stale ACL of %s on %s: %w", g.User, name, err)
				}
			}
		}
	}
	return nil
}

// SetPasswords makes passwords (by user) the SCRAM-SHA-512 credentials of
// those users, creating the users that do not exist. admin must be the
// administrator.
func SetPasswords(admin sarama.ClusterAdmin, passwords map[string]string) error {
	var upserts []sarama.AlterUserScramCredentialsUpsert
	for _, user := range Users() {
		pw, ok := passwords[user]
		if !ok {
			continue
		}
		salt := make([]byte, 32)
		if _, err := rand.Read(salt); err != nil {
			return fmt.Errorf("kafkaacl: salt: %w", err)
		}
		upserts = append(upserts, sarama.AlterUserScramCredentialsUpsert{
			Name: user, Mechanism: sarama.SCRAM_MECHANISM_SHA_512, Iterations: 8192, Salt: salt, Password: []byte(pw),
		})
	}
	results, err := admin.UpsertUserScramCredentials(upserts)
	if err != nil {
		return fmt.Errorf("kafkaacl: set SCRAM credentials: %w", err)
	}
	var errs []error
	for _, r := range results {
		if r.ErrorCode != sarama.ErrNoError {
			errs = append(errs, fmt.Errorf("kafkaacl: SCRAM credentials of %s: %w (%s)", r.User, r.ErrorCode, stringOr(r.ErrorMessage)))
		}
	}
	return errors.Join(errs...)
}

func stringOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// NewPassword returns a random password: 32 bytes, hex-encoded.
func NewPassword() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on the systems Go supports
	}
	return hex.EncodeToString(b)
}

// Find returns the Grant of user.
func Find(user string) (Grant, bool) {
	i := slices.IndexFunc(Grants, func(g Grant) bool { return g.User == user })
	if i < 0 {
		return Grant{}, false
	}
	return Grants[i], true
}
