package consumer

import (
	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"
)

// authenticate makes c log in as user with SASL/SCRAM-SHA-512, the
// mechanism Choreo's brokers offer; sarama leaves the SCRAM exchange to a
// library (xdg-go/scram).
func authenticate(c *sarama.Config, user, password string) {
	c.Net.SASL.Enable = true
	c.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
	c.Net.SASL.User, c.Net.SASL.Password = user, password
	c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{} }
}

// scramClient is sarama.SCRAMClient on xdg-go/scram.
type scramClient struct{ conv *scram.ClientConversation }

func (s *scramClient) Begin(user, password, authzID string) error {
	c, err := scram.SHA512.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	s.conv = c.NewConversation()
	return nil
}

func (s *scramClient) Step(challenge string) (string, error) { return s.conv.Step(challenge) }

func (s *scramClient) Done() bool { return s.conv.Done() }
