package main

import "testing"

func TestPickTarget(t *testing.T) {
	// st builds the states of instances 1 and 2: "r" runs, "l" runs and
	// leads the relay, "-" is down or paused, "L" leads but is down.
	st := func(one, two string) []instState {
		mk := func(n int, s string) instState {
			return instState{Index: n, Running: s == "r" || s == "l", Leads: s == "l" || s == "L"}
		}
		return []instState{mk(1, one), mk(2, two)}
	}
	tests := []struct {
		name      string
		kind      Kind
		scheduled int
		states    []instState
		relaxed   bool
		want      int
	}{
		{"KillScheduled", KindKill, 2, st("r", "r"), false, 2},
		{"KillScheduledDown", KindKill, 2, st("r", "-"), false, 1},
		{"KillBothDown", KindKill, 1, st("-", "-"), false, 0},
		{"CrashLoopScheduledDown", KindCrashLoop, 1, st("-", "l"), false, 2},

		{"PauseLeaderFollowsTheLeader", KindPauseLeader, 1, st("r", "l"), false, 2},
		{"PauseLeaderWaitsForAKnownLeader", KindPauseLeader, 1, st("r", "r"), false, 0},
		{"PauseLeaderLeaderDown", KindPauseLeader, 1, st("L", "r"), false, 0},
		{"PauseLeaderRelaxedTakesTheScheduled", KindPauseLeader, 1, st("r", "r"), true, 1},
		{"PauseLeaderRelaxedTakesWhatRuns", KindPauseLeader, 1, st("L", "r"), true, 2},
		{"PauseLeaderNothingRuns", KindPauseLeader, 1, st("-", "-"), true, 0},

		{"PauseConsumerScheduled", KindPauseConsumer, 1, st("r", "l"), false, 1},
		{"PauseConsumerAvoidsTheLeader", KindPauseConsumer, 1, st("l", "r"), false, 2},
		{"PauseConsumerScheduledDown", KindPauseConsumer, 2, st("r", "-"), false, 1},
		{"PauseConsumerLeaderUnknown", KindPauseConsumer, 2, st("r", "r"), false, 2},
		{"PauseConsumerOnlyTheLeaderRuns", KindPauseConsumer, 1, st("-", "l"), false, 0},
		{"PauseConsumerRelaxedTakesTheLeader", KindPauseConsumer, 1, st("-", "l"), true, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := pickTarget(tt.kind, tt.scheduled, tt.states, tt.relaxed); got != tt.want {
				t.Fatalf("pickTarget(%s, scheduled %d, %s, relaxed %v) = %d, want %d",
					tt.kind, tt.scheduled, describeStates(tt.states), tt.relaxed, got, tt.want)
			}
		})
	}
}
