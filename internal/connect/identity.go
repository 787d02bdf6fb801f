package connect

import (
	"fmt"
	"regexp"
)

// serviceName is what a service's name may be: it is a Kafka user, a JAAS
// string and part of a replication slot's name.
var serviceName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// identity is the producer override that makes a service's connector
// produce as the service's own Kafka user, whose password the worker reads
// from the connector's secrets file. The worker's own user, connect, may
// write none of the services' topics (internal/kafkaacl), so a topic still
// proves which service wrote an event, as the consumers' Guard assumes. The
// worker allows the override by connector.client.config.override.policy=
// Principal (sasl.jaas.config, sasl.mechanism and security.protocol only).
func identity(service, secrets string) (map[string]string, error) {
	if !serviceName.MatchString(service) {
		return nil, fmt.Errorf("connect: service name %q: want lower-case letters, digits and underscores", service)
	}
	return map[string]string{
		"producer.override.sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required username="` +
			service + `" password="` + secretRef(secrets, keyKafkaPassword) + `";`,
	}, nil
}
