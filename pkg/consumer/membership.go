package consumer

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/IBM/sarama"
)

// InstanceID is the static member id (KIP-345) of a service instance that
// was given none: group, host name and HTTP port, e.g. "payment-pod-7-8081".
// No two live processes share it (one host, one port), and a process that
// restarts in the same container or pod gets it back, so after a crash it
// takes its partitions back at once instead of waiting out its dead
// predecessor's session. An address without a fixed port (":0", as tests
// use) gives "": dynamic membership.
func InstanceID(group, hostname, httpAddr string) string {
	_, port, err := net.SplitHostPort(httpAddr)
	if err != nil || port == "" || port == "0" || hostname == "" {
		return ""
	}
	id := group + "-" + hostname + "-" + port
	// Kafka allows [a-zA-Z0-9._-] in an instance id, up to 249 characters.
	id = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '-'
	}, id)
	if len(id) > 249 {
		id = id[:249]
	}
	return id
}

// leaveTimeout bounds the removal of a static member at shutdown; past it
// the member expires with its session instead.
const leaveTimeout = 5 * time.Second

// leave removes this static member from its group. Close does not: a
// static member is expected back (KIP-345), so a process that stops on
// purpose (SIGTERM, a rolling deploy) would otherwise hold its partitions
// until its session timed out. A crash never gets here, which is what
// lets a restarted instance reclaim its partitions without a rebalance.
//
// The request names this member's own member id beside the instance id,
// so the coordinator refuses it (fenced) if another process holds the id
// now: a stop never removes someone else.
func (g *Group) leave() error {
	g.mu.Lock()
	member := g.memberID
	g.mu.Unlock()
	if member == "" || g.fenced.Load() {
		return nil // never a member, or no longer: nothing of ours to remove
	}
	done := make(chan error, 1)
	go func() {
		c, err := g.cluster()
		if err != nil {
			done <- err
			return
		}
		coord, err := c.client.Coordinator(g.cfg.GroupID)
		if err != nil {
			done <- err
			return
		}
		id := g.cfg.InstanceID
		resp, err := coord.LeaveGroup(&sarama.LeaveGroupRequest{
			Version: 3, GroupId: g.cfg.GroupID,
			Members: []sarama.MemberIdentity{{MemberId: member, GroupInstanceId: &id}},
		})
		if err == nil && resp.Err != sarama.ErrNoError {
			err = resp.Err
		}
		if err == nil {
			for _, m := range resp.Members {
				// Unknown: the coordinator already dropped the member.
				if m.Err != sarama.ErrNoError && !errors.Is(m.Err, sarama.ErrUnknownMemberId) {
					err = m.Err
				}
			}
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("consumer: remove static member %s from %s: %w", g.cfg.InstanceID, g.cfg.GroupID, err)
		}
		return nil
	case <-time.After(leaveTimeout):
		return fmt.Errorf("consumer: remove static member %s from %s: no answer in %s", g.cfg.InstanceID, g.cfg.GroupID, leaveTimeout)
	}
}
