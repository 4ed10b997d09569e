package refresh_test

import (
	"testing"

	"github.com/bootimage-operator/bootimage-operator/refresh"
)

// FuzzDecide parses two configs and a no-reboot-paths list and decides: never a panic.
func FuzzDecide(f *testing.F) {
	f.Add([]byte(`{"ignition":{"version":"3.2.0"}}`), []byte(`{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/motd","contents":{"source":"data:,hi"}}]}}`), []byte(`[{"path":"/etc/","action":"None"}]`))
	f.Add([]byte(`{"kind":"MachineConfig","spec":{"config":{"ignition":{"version":"3.1.0"}},"fips":true}}`), []byte(`{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/containers/registries.conf","contents":{"source":"data:,%5B%5Bregistry%5D%5D"}}]}}`), []byte(`[]`))
	f.Add([]byte(`{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/x","contents":{"source":"data:;base64,H4sI","compression":"gzip"}}]}}`), []byte(`{}`), []byte(`{`))
	policies := refresh.DefaultPolicies()
	allowed := refresh.AllowedServices(policies)
	f.Fuzz(func(t *testing.T, oldRaw, newRaw, pathsRaw []byte) {
		oldCfg, err := refresh.Parse(oldRaw)
		if err != nil {
			return
		}
		newCfg, err := refresh.Parse(newRaw)
		if err != nil {
			return
		}
		changes, err := refresh.Diff(oldCfg, newCfg)
		if err != nil {
			return
		}
		res := refresh.Decide(changes, policies)
		if paths, err := refresh.ParseNoRebootPaths(pathsRaw); err == nil {
			relaxed := refresh.DecideWithNoRebootPaths(changes, policies, paths, allowed)
			// A list may relax file decisions, but never turn a Reject into anything else.
			if res.Outcome == refresh.Reject && relaxed.Outcome != refresh.Reject {
				t.Fatalf("no-reboot-paths turned Reject into %s", relaxed.Outcome)
			}
		}
	})
}
