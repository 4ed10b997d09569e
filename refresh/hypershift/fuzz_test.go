package hypershift_test

import (
	"testing"

	"github.com/bootimage-operator/bootimage-operator/refresh"
	"github.com/bootimage-operator/bootimage-operator/refresh/hypershift"
	"github.com/bootimage-operator/bootimage-operator/refresh/internal/fuzzed"
)

// FuzzDecideWithNoRebootPaths decides two fuzzed configs with a fuzzed list: a list may relax file
// decisions, never turn a Reject into anything else, and the list generated from the policies
// never applies in place what the policies do not.
func FuzzDecideWithNoRebootPaths(f *testing.F) {
	f.Add([]byte(`{"ignition":{"version":"3.2.0"}}`), []byte(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/motd","contents":{"source":"data:,hi"}}]}}`), []byte(`[{"path":"/etc/","action":"None"}]`))
	f.Add([]byte(`{"kind":"MachineConfig","spec":{"config":{"ignition":{"version":"3.1.0"}},"fips":true}}`), []byte(`{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/containers/registries.conf","contents":{"source":"data:,%5B%5Bregistry%5D%5D"}}]}}`), []byte(`[]`))
	f.Add([]byte(`{"ignition":{"version":"3.2.0"},"storage":{"directories":[{"path":"/etc/x"}]}}`), []byte(`{"ignition":{"version":"3.2.0"}}`), []byte(`[{"path":"/","action":"None"}]`))
	policies := refresh.DefaultPolicies()
	allowed := hypershift.AllowedServices(policies)
	generated := hypershift.NoRebootPathsFromPolicies(policies)
	f.Fuzz(func(t *testing.T, oldRaw, newRaw, pathsRaw []byte) {
		_, changes, ok := fuzzed.Changes(oldRaw, newRaw)
		if !ok {
			return
		}
		res := refresh.Decide(changes, policies)
		if g := hypershift.DecideWithNoRebootPaths(changes, policies, generated, allowed); g.Outcome == refresh.InPlace && res.Outcome != refresh.InPlace {
			t.Fatalf("the generated list applies in place what the policies decide %s", res.Outcome)
		}
		if paths, err := hypershift.ParseNoRebootPaths(pathsRaw); err == nil {
			if relaxed := hypershift.DecideWithNoRebootPaths(changes, policies, paths, allowed); res.Outcome == refresh.Reject && relaxed.Outcome != refresh.Reject {
				t.Fatalf("no-reboot-paths turned Reject into %s", relaxed.Outcome)
			}
		}
	})
}
